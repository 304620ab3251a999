package app

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Property is one key=value pair read from a Java .properties file, with the
// line it started on so that errors can point at it.
type Property struct {
	Key   string
	Value string
	Line  int
}

// ParseProperties reads Java .properties syntax, the format of Kafka's
// server.properties, so a user can hand kraftd the same file they hand Kafka:
//
//   - `key=value`, `key: value` and `key value` all separate key and value;
//   - lines whose first non-blank character is '#' or '!' are comments;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - \t \n \r \f \uXXXX and \<any> escapes are decoded in keys and values.
//
// Properties are returned in file order; a later duplicate overrides an
// earlier one when applied, as with java.util.Properties.
func ParseProperties(r io.Reader) ([]Property, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var (
		props   []Property
		logical strings.Builder
		startAt int
		lineNo  int
	)
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		line = strings.TrimSuffix(line, "\r")
		if logical.Len() == 0 {
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			startAt = lineNo
		}
		if continues(line) {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		p, err := parseLogicalLine(logical.String(), startAt)
		if err != nil {
			return nil, err
		}
		props = append(props, p)
		logical.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPropertiesSyntax, err)
	}
	if logical.Len() > 0 {
		p, err := parseLogicalLine(logical.String(), startAt)
		if err != nil {
			return nil, err
		}
		props = append(props, p)
	}
	return props, nil
}

// continues reports whether a natural line ends in an odd number of
// backslashes, which joins it with the next one.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// parseLogicalLine splits one logical line into key and value. The key ends
// at the first unescaped '=', ':' or blank; blanks and at most one '=' or ':'
// separate it from the value.
func parseLogicalLine(s string, line int) (Property, error) {
	end := len(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rawKey, rest := s[:end], s[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	key, err := unescape(rawKey)
	if err != nil {
		return Property{}, fmt.Errorf("%w: line %d: %w", ErrPropertiesSyntax, line, err)
	}
	value, err := unescape(rest)
	if err != nil {
		return Property{}, fmt.Errorf("%w: line %d: %w", ErrPropertiesSyntax, line, err)
	}
	return Property{Key: key, Value: value, Line: line}, nil
}

// unescape decodes the backslash escapes Java's Properties.load accepts.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// javaDateLayout is java.util.Date.toString's "EEE MMM dd HH:mm:ss zzz yyyy".
const javaDateLayout = "Mon Jan 02 15:04:05 MST 2006"

// StoreProperties renders props the way java.util.Properties.store(writer, "")
// does on a current JDK (18+): an empty comment line, a date comment line,
// then the entries sorted by key. Kafka writes meta.properties this way, so
// files written by kraftd and by kafka-storage.sh look alike.
func StoreProperties(props map[string]string, now time.Time) []byte {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("#\n#")
	b.WriteString(now.Format(javaDateLayout))
	b.WriteByte('\n')
	for _, k := range keys {
		b.WriteString(escape(k, true))
		b.WriteByte('=')
		b.WriteString(escape(props[k], false))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// escape applies Properties.store escaping: separators and comment characters
// get a backslash, control characters become escapes, and blanks are escaped
// everywhere in a key but only at the start of a value.
func escape(s string, isKey bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == ' ' && (isKey || i == 0):
			b.WriteString(`\ `)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case strings.ContainsRune(`=:#!\`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
