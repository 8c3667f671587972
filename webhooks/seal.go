package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Sealing: a receiver's own credentials (an A2A push config's token, its Authorization
// credentials) are recorded in the session's journal sealed with a key derived from the
// node's secret (AES-256-GCM), so the journal, the session's state and its events never
// hold them in the clear; the Sender opens them when it sends (Attempt.SealedHeader).
// Every node of a cluster has the same secret, so any of them delivers.

// sealedPrefix starts every sealed value.
const sealedPrefix = "sealed1:"

// ErrNotSealed is what Open answers for a value this node's key did not seal.
var ErrNotSealed = errors.New("not a value sealed with this node's webhook secret")

func sealKey(key []byte) (cipher.AEAD, error) {
	k := sha256.Sum256(append([]byte("fathom webhook credentials\x00"), key...))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return aead, nil
}

// Seal returns plain sealed with the sender's key ("" stays "").
func (s *Sender) Seal(plain string) (string, error) {
	if plain == "" {
		return "", nil
	}
	aead, err := sealKey(s.key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(plain), nil)), nil
}

// open returns the plain text of a value Seal returned ("" stays "").
func (s *Sender) open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	b64, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", ErrNotSealed
	}
	raw, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil {
		return "", ErrNotSealed
	}
	aead, err := sealKey(s.key)
	if err != nil {
		return "", err
	}
	if len(raw) < aead.NonceSize() {
		return "", ErrNotSealed
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	if err != nil {
		return "", ErrNotSealed
	}
	return string(plain), nil
}
