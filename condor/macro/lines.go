package macro

import "strings"

// JoinContinued returns the logical line that starts at physical line i of
// an HTCondor configuration or submit file, and the index of the last
// physical line it takes: a line whose last non-blank character is a
// backslash continues on the next, its leading blanks dropped. A comment
// line inside a continued definition is dropped; a backslash at its end
// carries the continuation on. A backslash on the file's last line is
// dropped.
func JoinContinued(phys []string, i int) (string, int) {
	line := phys[i]
	for strings.HasSuffix(strings.TrimRight(line, " \t"), "\\") && i+1 < len(phys) {
		line = strings.TrimRight(line, " \t")
		line = line[:len(line)-1]
		i++
		next := strings.TrimLeft(phys[i], " \t")
		if strings.HasPrefix(next, "#") {
			if strings.HasSuffix(strings.TrimRight(next, " \t"), "\\") {
				line += "\\"
			}
			continue
		}
		line += next
	}
	if t := strings.TrimRight(line, " \t"); strings.HasSuffix(t, "\\") {
		line = t[:len(t)-1]
	}
	return line, i
}
