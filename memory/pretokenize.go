package memory

import "math/bits"

// A pre-tokeniser for ASCII text, written out by hand for the two encodings of current
// chat models. tiktoken splits text into pieces with a regular expression before byte-pair
// encoding each piece; tiktoken-go runs that expression with regexp2 (a backtracking
// engine), which costs more than everything else in a count and allocates on every match.
// For text without bytes ≥ 0x80, the pieces of o200k_base's and cl100k_base's patterns
// follow from a few character classes, so a scanner finds them directly. Text with any
// other byte is split by the pattern itself (regexp2, as tiktoken-go splits it); either
// way each piece is merged by bpe.go. FuzzASCIICountMatchesTiktoken checks the
// scanner against tiktoken-go.
//
// The patterns, with \p{L}, \p{N} and \s restricted to ASCII (letters A–Z a–z, digits
// 0–9, white space \t \n \v \f \r and the space):
//
//	o200k_base  [^\r\nL N]?[A-Z]*[a-z]+C? | [^\r\nL N]?[A-Z]+[a-z]*C? | N{1,3} | ␠?[^\sL N]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//	cl100k_base C | [^\r\nL N]?L+ | N{1,3} | ␠?[^\sL N]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// where C is the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d). At each position the first
// alternative that matches wins, with its own greedy backtracking, as in the regex.

// asciiClass is a byte's character class for the scanner.
const (
	clsOther = iota // punctuation, symbols, control characters
	clsUpper
	clsLower
	clsDigit
	clsNewline // \r \n
	clsSpace   // the space, \t \v \f
)

var asciiClasses = func() (t [256]uint8) {
	for c := range 128 {
		switch {
		case c >= 'A' && c <= 'Z':
			t[c] = clsUpper
		case c >= 'a' && c <= 'z':
			t[c] = clsLower
		case c >= '0' && c <= '9':
			t[c] = clsDigit
		case c == '\r' || c == '\n':
			t[c] = clsNewline
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			t[c] = clsSpace
		default:
			t[c] = clsOther
		}
	}
	return t
}()

// isASCII reports whether s has no byte ≥ 0x80.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7] >= 0x80 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

type asciiText string

func (s asciiText) cls(i int) uint8 { return asciiClasses[s[i]] }

func (s asciiText) isLetter(i int) bool {
	c := s.cls(i)
	return c == clsUpper || c == clsLower
}

func (s asciiText) isSpace(i int) bool {
	c := s.cls(i)
	return c == clsSpace || c == clsNewline
}

// prefixable reports whether byte i may open a letter piece: [^\r\n\p{L}\p{N}].
func (s asciiText) prefixable(i int) bool {
	c := s.cls(i)
	return c == clsOther || c == clsSpace
}

// run returns the end of the run of bytes from i that satisfy in.
func (s asciiText) run(i int, in func(int) bool) int {
	for i < len(s) && in(i) {
		i++
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
func (s asciiText) contraction(i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	lower := func(j int) byte {
		if j >= len(s) {
			return 0
		}
		return s[j] | 0x20
	}
	switch lower(i + 1) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r':
		if lower(i+2) == 'e' {
			return i + 3
		}
	case 'v':
		if lower(i+2) == 'e' {
			return i + 3
		}
	case 'l':
		if lower(i+2) == 'l' {
			return i + 3
		}
	}
	return i
}

func (s asciiText) isDigit(i int) bool { return s.cls(i) == clsDigit }
func (s asciiText) isNewline(i int) bool {
	return s.cls(i) == clsNewline
}
func (s asciiText) isPunct(i int) bool { return s.cls(i) == clsOther }

// o200kLetters matches o200k_base's two letter alternatives at i (after an optional
// prefix byte): [A-Z]*[a-z]+C? or else [A-Z]+[a-z]*C?. It returns the end, or i. Both
// alternatives end where a run of capitals and then a run of lowercase letters ends
// (backtracking the capitals cannot make the first match where the second fails), so the
// end is the first byte that is no letter or a capital after a lowercase letter: found
// eight bytes at a time (letterStops), without a branch per byte, which on text whose
// letter runs are short and random (base64) would be mispredicted once a piece.
func (s asciiText) o200kLetters(i int) int {
	j, lower := i, uint64(0)
	for ; j+8 <= len(s); j += 8 {
		var stop uint64
		if stop, lower = letterStops(load64(string(s), j), lower); stop != 0 {
			if j += bits.TrailingZeros64(stop) >> 3; j == i {
				return i
			}
			if s[j] != '\'' { // no contraction: the common case, without a call
				return j
			}
			return s.contraction(j)
		}
	}
	cls := &asciiClasses
	for ; j < len(s); j++ {
		if c := cls[s[j]]; c == clsLower {
			lower = 1
		} else if c != clsUpper || lower != 0 {
			break
		}
	}
	if j == i {
		return i
	}
	return s.contraction(j)
}

// letterStops returns the bytes of x (eight bytes of ASCII text, little-endian) that end
// a letter piece begun before them, each as its high bit: a byte that is no letter, or a
// capital after a lowercase letter. lower is not 0 if the piece had a lowercase letter
// before x; lower2 is the same after x (all ones if so). Without a branch, so that it is
// inlined.
func letterStops(x, lower uint64) (stop, lower2 uint64) {
	const hi, ones = 0x8080808080808080, 0x0101010101010101
	// The high bit of each byte ≥ c (the bytes are below 0x80) is ((x|hi) - c*ones) & hi.
	up := ((x | hi) - 'A'*ones) &^ ((x | hi) - ('Z'+1)*ones) & hi
	low := ((x | hi) - 'a'*ones) &^ ((x | hi) - ('z'+1)*ones) & hi
	// The bytes after the piece's first lowercase letter: all of them if it had one
	// before x, else those after x's first (none if x has none).
	lower = uint64(int64(lower|-lower) >> 63)
	after := lower | -((low & -low) << 1)
	return (hi &^ (up | low)) | (up & after), lower | uint64(int64(low|-low)>>63)
}

// whitespace matches \s*[\r\n]+ | \s+(?!\S) | \s+ at i, which holds white space.
func (s asciiText) whitespace(i int) int {
	end := s.run(i, s.isSpace)
	// \s*[\r\n]+: up to the last newline of the run.
	for j := end - 1; j >= i; j-- {
		if s.isNewline(j) {
			return j + 1
		}
	}
	// \s+(?!\S): the whole run at the end of the text, else all but its last byte.
	if end == len(s) || end-1 > i {
		if end == len(s) {
			return end
		}
		return end - 1
	}
	return end // \s+
}

// punct matches ␠?[^\sL N]+ followed by the trailing class at i, or returns i.
func (s asciiText) punct(i int, trailing func(int) bool) int {
	j := i
	if s[j] == ' ' && j+1 < len(s) && s.isPunct(j+1) {
		j++
	}
	if !s.isPunct(j) {
		return i
	}
	j = s.run(j, s.isPunct)
	return s.run(j, trailing)
}

// splitO200K calls piece with each piece of ASCII text s under o200k_base's pattern:
// piece by piece (endO200K), and block by block (o200kBlock) after a piece of one or two
// bytes that starts with a simple byte and is followed by one. Tokenizer.countASCII is
// the same loop, counting.
func splitO200K(s asciiText, piece func(string)) {
	for i := 0; i < len(s); {
		end := s.endO200K(i)
		piece(string(s[i:end]))
		if end-i <= 2 && end < len(s) && o200kBlockSimple[s[i]] && o200kBlockSimple[s[end]] {
			for end < len(s) {
				starts, simple := s.o200kBlock(end)
				a := end
				for m := starts & (starts - 1); m != 0; m &= m - 1 {
					b := end + bits.TrailingZeros64(m)
					piece(string(s[a:b]))
					a = b
				}
				if a == end || simple < 64 {
					end = a
					break
				}
				end = a
			}
		}
		i = end
	}
}

// endO200K returns the end of the piece of ASCII text s at i under o200k_base's pattern.
func (s asciiText) endO200K(i int) int {
	cls := &asciiClasses
	switch c := cls[s[i]]; c {
	case clsUpper, clsLower:
		return s.o200kLetters(i)
	case clsDigit:
		end := i + 1
		for end < len(s) && end < i+3 && cls[s[end]] == clsDigit {
			end++
		}
		return end
	default:
		// A letter piece with a prefix byte, else punctuation or white space.
		if c != clsNewline && i+1 < len(s) {
			if e := s.o200kLetters(i + 1); e > i+1 {
				return e
			}
		}
		if e := s.punct(i, s.o200kTrailing); e > i {
			return e
		}
		return s.whitespace(i)
	}
}

// o200kTrailing reports whether byte i may trail an o200k_base punctuation piece:
// [\r\n/].
func (s asciiText) o200kTrailing(i int) bool { return s.isNewline(i) || s[i] == '/' }

// splitCL100K calls piece with each piece of ASCII text s under cl100k_base's pattern.
func splitCL100K(s asciiText, piece func(string)) {
	for i := 0; i < len(s); {
		end := s.endCL100K(i)
		piece(string(s[i:end]))
		i = end
	}
}

// endCL100K returns the end of the piece of ASCII text s at i under cl100k_base's pattern.
func (s asciiText) endCL100K(i int) int {
	end := s.contraction(i)
	if end == i && s.prefixable(i) && i+1 < len(s) && s.isLetter(i+1) {
		end = s.run(i+1, s.isLetter)
	}
	if end == i {
		switch {
		case s.isLetter(i):
			end = s.run(i, s.isLetter)
		case s.isDigit(i):
			end = min(s.run(i, s.isDigit), i+3)
		default:
			if e := s.punct(i, s.isNewline); e > i {
				end = e
			} else {
				end = s.whitespace(i)
			}
		}
	}
	return end
}

// o200kBlockSimple marks the bytes of o200kBlock's blocks: ASCII that is neither white
// space nor an apostrophe.
var o200kBlockSimple = func() (t [256]bool) {
	for c := range 128 {
		t[c] = asciiClasses[c] != clsSpace && asciiClasses[c] != clsNewline && c != '\''
	}
	return t
}()

// o200kBlock returns the starts of o200k_base's pieces among the 64 bytes of ASCII text
// s from i, a piece start, as bits (bit k for byte i+k; bit 0 always set), and simple,
// the number of those bytes before the first that is white space, an apostrophe or past
// the text's end (64 if none): the starts are those before it. On text without white
// space or apostrophes (base64, hex, identifiers) a piece is a letter run (capitals then
// lowercase letters, after one punctuation byte if one precedes it), up to three digits
// or a run of punctuation, so its starts follow from the bytes' classes and their
// neighbours' without a branch per piece, eight bytes at a time. No piece of the pattern
// looks behind its start, so the pieces from i are those of s[i:] alone; a piece's end
// depends on the bytes up to it (the apostrophe of a contraction, the white space and
// newlines a piece takes are not simple), so every start before simple is exact. The
// piece at the last start may go on past the block: the caller splits it (endO200K).
func (s asciiText) o200kBlock(i int) (starts uint64, simple int) {
	w := string(s[i:])
	if len(w) < 64 {
		var buf [64]byte
		copy(buf[copy(buf[:], w):], "                                                                ")
		w = string(buf[:])
	}
	const hi, ones = 0x8080808080808080, 0x0101010101010101
	var up, low, dig, other uint64 // one bit a byte
	for k := range 8 {
		x := load64(w, 8*k) | hi
		u := (x - 'A'*ones) &^ (x - ('Z'+1)*ones)
		l := (x - 'a'*ones) &^ (x - ('z'+1)*ones)
		d := (x - '0'*ones) &^ (x - ('9'+1)*ones)
		// White space (\t to \r and the space) and the apostrophe: a byte equal to c
		// has its high bit clear in (x ^ c) - ones, where x has all high bits set.
		ws := (x - '\t'*ones) &^ (x - ('\r'+1)*ones)
		ws |= ^((x ^ ' '*ones) - ones) | ^((x ^ '\''*ones) - ones)
		up |= movemask(u) << (8 * k)
		low |= movemask(l) << (8 * k)
		dig |= movemask(d) << (8 * k)
		if other |= movemask(ws) << (8 * k); other != 0 {
			break // the rest of the block is past simple: text with words stops early
		}
	}
	simple = bits.TrailingZeros64(other)
	punct := ^(up | low | dig | other)
	letter := up | low
	// Digits: a start at each run's first digit and every third digit after it.
	digits := dig &^ (dig << 1)
	three := dig & (dig << 1) & (dig << 2)
	for x := (digits << 3) & three; x != 0; x = (x << 3) & three {
		digits |= x
	}
	starts = 1 | digits |
		up&(low<<1) | // a capital after a lowercase letter
		letter&(dig<<1) |
		letter&(punct<<1)&(punct<<2) | // after a run of punctuation (one byte is the letters' prefix)
		punct&^(punct<<1)
	return starts & (other&-other - 1), simple
}

// movemask gathers the high bits of x's eight bytes into its low eight bits.
func movemask(x uint64) uint64 {
	return ((x & 0x8080808080808080) * 0x0002040810204081) >> 56
}
