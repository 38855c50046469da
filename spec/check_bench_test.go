package spec

import (
	"fmt"
	"strings"
	"testing"
)

// hugeDecls is how many declarations each huge spec holds: the size the
// issue asks check to take in under two seconds.
const hugeDecls = 100_000

// maxMessageCode is the largest message code (14 bits): a spec holds at
// most this many messages.
const maxMessageCode = 1<<14 - 1

// hugeSpecs are specs of hugeDecls declarations in the shapes that once
// made check superlinear, each under MaxSpecSize.
func hugeSpecs() map[string]string {
	head := "protocol huge;\nversion 1;\n"
	var chain, ring, fields, mixed strings.Builder
	// A chain of structs each holding the next: one search per struct
	// for recursion made this quadratic (22 s of CPU at 20,000).
	chain.WriteString(head)
	for i := range hugeDecls - 1 {
		fmt.Fprintf(&chain, "struct s%d{n:s%d;}\n", i, i+1)
	}
	fmt.Fprintf(&chain, "struct s%d{}\n", hugeDecls-1)
	// The same chain closed into a ring through a list: every struct is
	// recursive, one strongly connected component.
	ring.WriteString(head)
	for i := range hugeDecls {
		fmt.Fprintf(&ring, "struct s%d{n:[]s%d;}\n", i, (i+1)%hugeDecls)
	}
	// One struct of hugeDecls fields.
	fields.WriteString(head + "struct s{\n")
	for i := range hugeDecls {
		fmt.Fprintf(&fields, "f%d:u8;\n", i)
	}
	fields.WriteString("}\n")
	// Every kind of declaration, as many messages as codes allow.
	mixed.WriteString(head)
	for i := 0; i < hugeDecls; i++ {
		switch k := i % 5; {
		case k == 0 && i/5 < maxMessageCode:
			fmt.Fprintf(&mixed, "message m%d=%d{a:t%d;b:e%d;}\n", i, i/5+1, i+1, i+2)
		case k == 1:
			fmt.Fprintf(&mixed, "type t%d=u32;\n", i)
		case k == 2:
			fmt.Fprintf(&mixed, "enum e%d:u8{a=1;}\n", i)
		case k == 3:
			fmt.Fprintf(&mixed, "machine k%d{start state a;final state b;event go;on go:a->b;}\n", i)
		default:
			fmt.Fprintf(&mixed, "invariant i%d \"x\";\n", i)
		}
	}
	return map[string]string{"struct_chain": chain.String(), "struct_ring": ring.String(), "fields": fields.String(), "mixed": mixed.String()}
}

// BenchmarkCheckHugeSpec: check (Parse) must stay near-linear; each of
// these specs is to be checked in well under two seconds.
func BenchmarkCheckHugeSpec(b *testing.B) {
	for name, src := range hugeSpecs() {
		b.Run(name, func(b *testing.B) {
			if len(src) > MaxSpecSize {
				b.Fatalf("%d bytes: over MaxSpecSize", len(src))
			}
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Parse("huge.rspec", []byte(src)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
