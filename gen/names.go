package gen

import (
	"strings"
	"unicode"
)

// initialisms are spelled in capitals in Go names, as golint asks.
var initialisms = map[string]string{
	"id": "ID", "rref": "RRef", "rpc": "RPC", "url": "URL", "http": "HTTP", "json": "JSON",
	"tcp": "TCP", "ip": "IP", "api": "API", "shm": "SHM", "io": "IO",
}

// goName turns a spec name (snake_case, or already CamelCase) into an exported Go name.
func goName(s string) string {
	if s == "" {
		return s
	}
	if !strings.Contains(s, "_") && unicode.IsUpper(rune(s[0])) {
		return s
	}
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		if v, ok := initialisms[part]; ok {
			b.WriteString(v)
			continue
		}
		if v, ok := initialisms[strings.TrimSuffix(part, "s")]; ok && strings.HasSuffix(part, "s") {
			b.WriteString(v + "s") // rrefs -> RRefs, ids -> IDs
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// lowerFirst makes an unexported identifier from an exported one.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	// Keep a leading initialism readable: RRefID -> rrefID.
	for _, v := range initialisms {
		if strings.HasPrefix(s, v) && v != s {
			return strings.ToLower(v) + s[len(v):]
		}
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func docText(doc []string) string { return strings.Join(doc, "\n") }
