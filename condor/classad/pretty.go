package classad

import "strings"

// prettyString prints e as HTCondor's unparse() does: record and list
// expressions, wherever they appear, laid out over several lines and
// indented, everything else as on one line.
func prettyString(e Expr) string {
	var b strings.Builder
	writePretty(&b, e, 0)
	return b.String()
}

func prettyIndent(b *strings.Builder, n int) {
	for i := 0; i < n; i++ {
		b.WriteByte(' ')
	}
}

// writePretty writes e at indentation base: a record opens on a new line
// indented base+4 with its attributes at base+8, a list on a new line
// indented base+3 with its elements at base+6.
func writePretty(b *strings.Builder, e Expr, base int) {
	switch n := e.(type) {
	case *adNode:
		b.WriteByte('\n')
		prettyIndent(b, base+4)
		b.WriteString("[\n")
		order := htcondorOrder(n.ad.order)
		for i, at := range order {
			prettyIndent(b, base+8)
			writeName(b, at.name)
			b.WriteString(" = ")
			writePretty(b, at.expr, base+8)
			if i < len(order)-1 {
				b.WriteString("; ")
			}
			b.WriteByte('\n')
		}
		prettyIndent(b, base+4)
		b.WriteByte(']')
	case *listNode:
		b.WriteByte('\n')
		prettyIndent(b, base+3)
		b.WriteString("{\n")
		for i, x := range n.elems {
			prettyIndent(b, base+6)
			writePretty(b, x, base+6)
			if i < len(n.elems)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		prettyIndent(b, base+3)
		b.WriteByte('}')
	case *parenNode:
		b.WriteByte('(')
		writePretty(b, n.x, base)
		b.WriteByte(')')
	case *binaryNode:
		var sub strings.Builder
		n.write(&sub, false)
		if !strings.ContainsAny(sub.String(), "[{") {
			b.WriteString(sub.String())
			return
		}
		writePretty(b, n.x, base)
		b.WriteByte(' ')
		b.WriteString(opText[n.op])
		b.WriteByte(' ')
		writePretty(b, n.y, base)
	default:
		e.write(b, false)
	}
}
