package retry

// sfKind is the type of a Structured Field bare item (RFC 9651 §3.3).
type sfKind uint8

const (
	sfInvalid sfKind = iota
	sfInteger
	sfDecimal
	sfString
	sfToken
	sfByteSequence
	sfBoolean
	sfDate
	sfDisplayString
)

// parseBareItem parses the bare item at the start of s (RFC 9651 §4.2.3.1)
// and returns its type, its value when it is an Integer, and the rest of s.
// It returns sfInvalid when s does not start with a well-formed bare item.
// Only the values the RateLimit field needs are kept: nothing is allocated.
func parseBareItem(s string) (kind sfKind, n int64, rest string) {
	if s == "" {
		return sfInvalid, 0, s
	}
	switch c := s[0]; {
	case c == '-' || '0' <= c && c <= '9':
		return parseNumber(s)
	case c == '"':
		return parseString(s[1:], sfString)
	case c == '*' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z':
		i := 1
		for i < len(s) && (isTchar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return sfToken, 0, s[i:]
	case c == ':':
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == ':':
				return sfByteSequence, 0, s[i+1:]
			case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/', c == '=':
			default:
				return sfInvalid, 0, s
			}
		}
		return sfInvalid, 0, s
	case c == '?':
		if len(s) >= 2 && (s[1] == '0' || s[1] == '1') {
			return sfBoolean, int64(s[1] - '0'), s[2:]
		}
		return sfInvalid, 0, s
	case c == '@':
		if kind, n, rest = parseNumber(s[1:]); kind != sfInteger {
			return sfInvalid, 0, s
		}
		return sfDate, n, rest
	case c == '%':
		if len(s) >= 2 && s[1] == '"' {
			return parseString(s[2:], sfDisplayString)
		}
	}
	return sfInvalid, 0, s
}

// parseNumber parses the Integer or Decimal at the start of s (RFC 9651
// §4.2.4): a digit after the optional sign, then at most 15 digits in all, or
// at most 12 before the point and 3 after it.
func parseNumber(s string) (kind sfKind, n int64, rest string) {
	i, sign := 0, int64(1)
	if s != "" && s[0] == '-' {
		i, sign = 1, -1
	}
	if i == len(s) || s[i] < '0' || s[i] > '9' {
		return sfInvalid, 0, s
	}
	start, point := i, -1
scan:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			n = n*10 + int64(c-'0') // 15 digits cannot overflow
		case c == '.' && point < 0:
			if i-start > 12 {
				return sfInvalid, 0, s
			}
			point = i
		default:
			break scan
		}
		if length := i - start + 1; point < 0 && length > 15 || length > 16 {
			return sfInvalid, 0, s
		}
	}
	switch {
	case point < 0:
		return sfInteger, sign * n, s[i:]
	case point == i-1 || i-point-1 > 3:
		return sfInvalid, 0, s // no digit, or more than 3, after the point
	}
	return sfDecimal, 0, s[i:]
}

// parseString parses the rest of a String (RFC 9651 §4.2.5) or Display
// String (§4.2.10) whose opening quote has been consumed. A Display String's
// UTF-8 is not validated: it is a comment that is never read.
func parseString(s string, kind sfKind) (sfKind, int64, string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return kind, 0, s[i+1:]
		case c == '\\' && kind == sfString:
			if i+1 == len(s) || s[i+1] != '"' && s[i+1] != '\\' {
				return sfInvalid, 0, s
			}
			i++
		case c == '%' && kind == sfDisplayString:
			if i+2 >= len(s) || !isLowerHex(s[i+1]) || !isLowerHex(s[i+2]) {
				return sfInvalid, 0, s
			}
			i += 2
		case c < 0x20 || c > 0x7e:
			return sfInvalid, 0, s
		}
	}
	return sfInvalid, 0, s // no closing quote
}

// parseKey parses the parameter key at the start of s (RFC 9651 §4.2.3.3)
// and returns it and the rest of s; the key is empty when there is none.
func parseKey(s string) (key, rest string) {
	if s == "" || s[0] != '*' && (s[0] < 'a' || s[0] > 'z') {
		return "", s
	}
	i := 1
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
	}
	return s[:i], s[i:]
}

func isLowerHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}
