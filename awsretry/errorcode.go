package awsretry

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"strings"

	"github.com/backoff-jitter/retry"
)

// Reading the AWS error code of a response: the x-amzn-ErrorType header,
// else the code of an XML or JSON error document.

// peekLimit bounds how much of an error body ErrorCode reads. AWS error
// documents are a few hundred bytes, and their code comes first.
const peekLimit = 16 << 10

// ErrorCode returns the AWS error code of an error response (status 400 and
// above), and whether it found one. It reads the x-amzn-ErrorType header
// first and otherwise the first 16 KiB of the body, through
// [retry.PeekBody], so the body still yields every byte to its reader.
// The code is stripped of a namespace ("com.amazonaws.dynamodb.v20120810#")
// and of a ":"-separated suffix, as the AWS SDKs do.
//
// ErrorCode returns "", false without reading anything for a nil response
// or a status below 400, and for a body that is not an AWS error document:
// malformed, truncated before the code, or not XML or JSON.
func ErrorCode(resp *http.Response) (string, bool) {
	if resp == nil || resp.StatusCode < 400 {
		return "", false
	}
	if code := sanitize(resp.Header.Get("X-Amzn-Errortype")); code != "" {
		return code, true
	}
	// A read error leaves a shorter prefix, which may still hold the code.
	prefix, _ := retry.PeekBody(resp, peekLimit)
	prefix = bytes.TrimLeft(bytes.TrimPrefix(prefix, []byte("\uFEFF")), " \t\r\n")
	var code string
	switch {
	case len(prefix) == 0:
		return "", false
	case prefix[0] == '<':
		code = xmlCode(prefix)
	case prefix[0] == '{':
		code = jsonCode(prefix)
	}
	code = sanitize(code)
	return code, code != ""
}

// maxCodeLen bounds an error code's length; AWS's are under 64 bytes.
const maxCodeLen = 256

// sanitize cuts an AWS error code out of a header or __type value the way
// the AWS SDKs do: what precedes a ":" (a documentation URL follows it),
// then what follows a "#" (a namespace precedes it). A result that does not
// look like a code (empty, or with spaces or control characters) is "".
func sanitize(code string) string {
	code, _, _ = strings.Cut(code, ":")
	// The namespace ends at the last '#': "aws.protocoltests#Code", and
	// never leave a '#' in what is taken for the code.
	code = code[strings.LastIndexByte(code, '#')+1:]
	code = strings.TrimSpace(code)
	if len(code) > maxCodeLen || strings.ContainsFunc(code, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return ""
	}
	return code
}

// xmlCode returns the text of the first complete <Code> element directly
// inside an <Error> element of doc, or "". It streams tokens, so a
// document truncated after the code still gives it, and stops at the first
// syntax error.
func xmlCode(doc []byte) string {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = false
	// Codes are ASCII: any ASCII-compatible charset yields them as is, and
	// an incompatible one fails to parse, which is no code found.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var stack []string
	var text strings.Builder
	inCode := false
	for {
		tok, err := d.Token()
		if err != nil {
			return "" // the end of the prefix, or garbage, before a complete code
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if inCode {
				return "" // a code has no markup inside
			}
			inCode = t.Name.Local == "Code" && len(stack) > 0 && stack[len(stack)-1] == "Error"
			stack = append(stack, t.Name.Local)
		case xml.CharData:
			if inCode {
				if text.Len()+len(t) > maxCodeLen {
					return "" // not a code
				}
				text.Write(t)
			}
		case xml.EndElement:
			if inCode {
				return text.String()
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// jsonCode returns the error code of a JSON error document: the top-level
// "__type", else a top-level "code" (any case), else "Code" in a top-level
// "Error" object. Only string values count. It streams tokens, so a
// document truncated after the code still gives it.
func jsonCode(doc []byte) string {
	d := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var typ, code, nested string
keys:
	for {
		tok, err := d.Token()
		if err != nil || tok == json.Delim('}') {
			break // truncated, malformed or done: use what was found
		}
		key, ok := tok.(string)
		if !ok {
			break
		}
		switch {
		case key == "__type":
			if s, ok := stringValue(d); ok && typ == "" {
				typ = s
			}
		case strings.EqualFold(key, "code"):
			if s, ok := stringValue(d); ok && code == "" {
				code = s
			}
		case strings.EqualFold(key, "error"):
			if s, ok := errorObjectCode(d); ok && nested == "" {
				nested = s
			}
		default:
			if !skipValue(d) {
				break keys
			}
		}
		if typ != "" {
			return typ // __type wins, and is usually first
		}
	}
	if code != "" {
		return code
	}
	return nested
}

// stringValue reads the next value of d and returns it if it is a string.
// A value of another kind is skipped; ok is false when reading failed or
// the value was not a string.
func stringValue(d *json.Decoder) (string, bool) {
	tok, err := d.Token()
	if err != nil {
		return "", false
	}
	if s, ok := tok.(string); ok {
		return s, true
	}
	if delim, ok := tok.(json.Delim); ok && (delim == '{' || delim == '[') {
		skipNested(d)
	}
	return "", false
}

// errorObjectCode reads the next value of d and, if it is an object, returns
// the string value of its "Code" key (any case).
func errorObjectCode(d *json.Decoder) (string, bool) {
	tok, err := d.Token()
	if err != nil {
		return "", false
	}
	if tok != json.Delim('{') {
		if delim, ok := tok.(json.Delim); ok && delim == '[' {
			skipNested(d)
		}
		return "", false
	}
	var code string
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		if tok == json.Delim('}') {
			return code, code != ""
		}
		key, ok := tok.(string)
		if !ok {
			return "", false
		}
		if strings.EqualFold(key, "code") && code == "" {
			code, _ = stringValue(d)
			continue
		}
		if !skipValue(d) {
			return "", false
		}
	}
}

// skipValue reads and discards the next value of d, reporting success.
func skipValue(d *json.Decoder) bool {
	tok, err := d.Token()
	if err != nil {
		return false
	}
	if delim, ok := tok.(json.Delim); ok && (delim == '{' || delim == '[') {
		return skipNested(d)
	}
	return true
}

// skipNested reads and discards tokens up to the end of the object or array
// whose opening delimiter was just read.
func skipNested(d *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}
