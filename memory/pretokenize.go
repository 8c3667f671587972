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

// splitO200K calls piece with each piece of ASCII text s under o200k_base's pattern.
func splitO200K(s asciiText, piece func(string)) {
	for i := 0; i < len(s); {
		end := s.endO200K(i)
		piece(string(s[i:end]))
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
