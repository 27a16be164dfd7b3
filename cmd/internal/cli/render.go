package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner"
)

// colorizer wraps text in ANSI colours when enabled.
type colorizer struct{ on bool }

func (c colorizer) wrap(code, s string) string {
	if !c.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (c colorizer) bold(s string) string   { return c.wrap("1", s) }
func (c colorizer) green(s string) string  { return c.wrap("32", s) }
func (c colorizer) red(s string) string    { return c.wrap("31", s) }
func (c colorizer) yellow(s string) string { return c.wrap("33", s) }
func (c colorizer) cyan(s string) string   { return c.wrap("36", s) }

func (c colorizer) symbol(a planner.Action) string {
	switch a {
	case planner.Create:
		return c.green("+")
	case planner.Delete:
		return c.red("-")
	case planner.Update:
		return c.yellow("~")
	case planner.DeleteThenCreate:
		return c.red("-") + "/" + c.green("+")
	case planner.CreateThenDelete:
		return c.green("+") + "/" + c.red("-")
	case planner.Read:
		return c.cyan("<=")
	case planner.Forget:
		return "."
	}
	return " "
}

// renderPlan writes a plan the way Terraform prints one.
func renderPlan(w io.Writer, p *planner.Plan, col colorizer) {
	if len(p.Drift) > 0 {
		renderDrift(w, p, col)
	}
	var changes []*planner.ResourceChange
	used := map[planner.Action]bool{}
	shown := map[string]bool{}
	for _, c := range p.Changes {
		if c.Action != planner.NoOp || c.Moved() || c.Importing != nil {
			changes = append(changes, c)
			used[c.Action] = true
			shown[c.Addr.String()] = true
		}
	}
	// Moves whose instance the plan leaves out (-target, -exclude) are
	// made all the same: show them.
	var moves []planner.Move
	for _, mv := range p.Moves {
		if !shown[mv.To.String()] {
			moves = append(moves, mv)
		}
	}
	if p.Mode == planner.RefreshOnlyMode {
		for _, mv := range moves {
			fmt.Fprintf(w, "\n  %s\n", col.bold("# "+mv.From.String()+" has moved to "+mv.To.String()))
		}
		if len(p.Drift) == 0 && len(moves) > 0 {
			fmt.Fprintln(w, "\nApplying this plan stores the moved objects at their new addresses, and changes nothing else.")
		} else if len(p.Drift) == 0 {
			fmt.Fprintln(w, "\n"+col.green("No changes.")+" Your infrastructure still matches the configuration.")
		} else {
			fmt.Fprintln(w, "\nThis is a refresh-only plan, so pond will not take any actions to undo these. If you were expecting these changes then you can apply this plan to record the updated values in the pond state without changing any remote objects.")
		}
		return
	}
	if len(changes) == 0 && len(moves) == 0 && !outputsChange(p) {
		fmt.Fprintln(w, "\n"+col.bold(col.green("No changes."))+col.bold(" Your infrastructure matches the configuration."))
		fmt.Fprintln(w, "\nPond has compared your real infrastructure against your configuration and found no differences, so no changes are needed.")
		return
	}
	if len(changes) > 0 || len(moves) > 0 {
		delete(used, planner.NoOp)
		if len(used) > 0 {
			fmt.Fprintln(w, "\nPond used the selected providers to generate the following execution plan. Resource actions are indicated with the following symbols:")
		}
		for _, a := range []planner.Action{planner.Create, planner.Update, planner.Delete, planner.DeleteThenCreate, planner.CreateThenDelete, planner.Read, planner.Forget} {
			if !used[a] {
				continue
			}
			desc := map[planner.Action]string{
				planner.Create:           "create",
				planner.Update:           "update in-place",
				planner.Delete:           "destroy",
				planner.DeleteThenCreate: "destroy and then create replacement",
				planner.CreateThenDelete: "create replacement and then destroy",
				planner.Read:             "read (data resources)",
				planner.Forget:           "forget",
			}[a]
			pad := "  "
			if a == planner.DeleteThenCreate || a == planner.CreateThenDelete {
				pad = ""
			} else if a == planner.Read {
				pad = " "
			}
			fmt.Fprintf(w, "%s%s %s\n", pad, col.symbol(a), desc)
		}
		fmt.Fprintln(w, "\nPond will perform the following actions:")
		for _, c := range changes {
			renderChange(w, c, col, false)
		}
		for _, mv := range moves {
			fmt.Fprintf(w, "\n  %s\n", col.bold("# "+mv.From.String()+" has moved to "+mv.To.String()))
		}
		fmt.Fprintf(w, "\n%s %s\n", col.bold("Plan:"), planSummary(p))
	}
	renderOutputChanges(w, p, col)
}

// imported is the "N imported, " of the apply summary, empty when the
// apply imported nothing.
func imported(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d imported, ", n)
}

// planSummary is the plan's counts as Terraform gives them after "Plan:".
func planSummary(p *planner.Plan) string {
	add, change, destroy := p.Counts()
	s := fmt.Sprintf("%d to add, %d to change, %d to destroy", add, change, destroy)
	if n := p.Imports(); n > 0 {
		s = fmt.Sprintf("%d to import, ", n) + s
	}
	if n := p.Forgets(); n > 0 {
		s += fmt.Sprintf(", %d to forget", n)
	}
	return s + "."
}

func outputsChange(p *planner.Plan) bool {
	for _, o := range p.OutputChanges {
		if o.Action != planner.NoOp {
			return true
		}
	}
	return false
}

func renderOutputChanges(w io.Writer, p *planner.Plan, col colorizer) {
	var lines []string
	width := 0
	for _, o := range p.OutputChanges {
		if o.Action != planner.NoOp && len(o.Name) > width {
			width = len(o.Name)
		}
	}
	for _, o := range p.OutputChanges {
		if o.Action == planner.NoOp {
			continue
		}
		name := fmt.Sprintf("%-*s", width, o.Name)
		var val string
		switch {
		case o.Sensitive:
			val = "(sensitive value)"
		case o.Action == planner.Create:
			val = formatValue(o.After, 4)
		case o.Action == planner.Delete:
			val = formatValue(o.Before, 4) + " -> null"
		default:
			val = formatValue(o.Before, 4) + " -> " + formatValue(o.After, 4)
		}
		lines = append(lines, fmt.Sprintf("  %s %s = %s", col.symbol(o.Action), name, val))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nChanges to Outputs:")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func renderDrift(w io.Writer, p *planner.Plan, col colorizer) {
	fmt.Fprintln(w, "\n"+col.bold("Note: Objects have changed outside of pond"))
	fmt.Fprintln(w, "\nPond detected the following changes made outside of pond since the last \"pondctl apply\" which may have affected this plan:")
	for _, c := range p.Drift {
		renderChange(w, c, col, true)
	}
	if p.Mode != planner.RefreshOnlyMode {
		fmt.Fprintln(w, "\nUnless you have made equivalent changes to your configuration, or ignored the relevant attributes using ignore_changes, the following plan may include actions to undo or respond to these changes.")
		fmt.Fprintln(w, "\n"+strings.Repeat("─", 77))
	}
}

func changeHeadline(c *planner.ResourceChange, drift bool) string {
	a := c.Addr.String()
	if drift {
		if c.Action == planner.Delete {
			return a + " has been deleted"
		}
		return a + " has changed"
	}
	if c.Moved() && c.Action == planner.NoOp {
		return c.PrevAddr.String() + " has moved to " + a
	}
	if c.Importing != nil && c.Action == planner.NoOp {
		return a + " will be imported"
	}
	switch c.Action {
	case planner.Create:
		return a + " will be created"
	case planner.Update:
		return a + " will be updated in-place"
	case planner.Delete:
		return a + " will be destroyed"
	case planner.DeleteThenCreate, planner.CreateThenDelete:
		return a + " must be replaced"
	case planner.Read:
		return a + " will be read during apply"
	case planner.Forget:
		return a + " will no longer be managed by pondctl"
	}
	return a
}

// renderChange prints one resource change with its attribute diff.
func renderChange(w io.Writer, c *planner.ResourceChange, col colorizer, drift bool) {
	fmt.Fprintf(w, "\n  %s\n", col.bold("# "+changeHeadline(c, drift)))
	if !drift && c.Moved() && c.Action != planner.NoOp {
		fmt.Fprintf(w, "  # (moved from %s)\n", c.PrevAddr)
	}
	if !drift && c.Importing != nil && c.Action != planner.NoOp {
		fmt.Fprintf(w, "  # (imported from %q)\n", c.Importing.ID)
	}
	if c.Reason != "" {
		fmt.Fprintf(w, "  # (%s)\n", c.Reason)
	}
	if !drift {
		for _, l := range costLines(c.Cost) {
			fmt.Fprintf(w, "  # (%s)\n", l)
		}
	}
	sym := col.symbol(c.Action)
	pad := "  "
	switch c.Action {
	case planner.DeleteThenCreate, planner.CreateThenDelete:
		pad = ""
	case planner.Read:
		pad = " "
	}
	head := fmt.Sprintf("%s %q", c.Addr.Type, c.Addr.Name)
	if c.Addr.IsData() {
		head = fmt.Sprintf("data %q %q", c.Addr.Type, c.Addr.Name)
	}
	fmt.Fprintf(w, "%s%s %s {\n", pad, sym, head)
	if c.Action == planner.NoOp && c.Moved() {
		// Only the address changes: every attribute stays as it is.
		n := 0
		if c.After.Type().IsObjectType() && !c.After.IsNull() {
			for it := c.After.ElementIterator(); it.Next(); {
				if _, v := it.Element(); !v.IsNull() {
					n++
				}
			}
		}
		fmt.Fprintf(w, "        # (%d unchanged attributes hidden)\n", n)
	} else {
		renderAttrs(w, c, col)
	}
	fmt.Fprintln(w, "    }")
}

func renderAttrs(w io.Writer, c *planner.ResourceChange, col colorizer) {
	before, after := c.Marked()
	names := map[string]bool{}
	for _, v := range []cty.Value{before, after} {
		if v.Type().IsObjectType() {
			for n := range v.Type().AttributeTypes() {
				names[n] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	sensitive := map[string]bool{}
	for _, s := range c.Sensitive {
		sensitive[s] = true
	}
	forces := map[string]bool{}
	for _, p := range c.RequiresReplace {
		if len(p) > 0 {
			if ga, ok := p[0].(cty.GetAttrStep); ok {
				forces[ga.Name] = true
			}
		}
	}
	type line struct {
		sym, name, val string
	}
	var lines []line
	hidden := 0
	width := 0
	for _, n := range sorted {
		bv, av := getAttr(before, n), getAttr(after, n)
		var l line
		switch {
		case bv.IsNull() && av.IsNull():
			continue
		case bv.IsNull():
			l = line{col.symbol(planner.Create), n, formatValue(av, 8)}
		case av.IsNull():
			l = line{col.symbol(planner.Delete), n, formatValue(bv, 8) + " -> null"}
		default:
			if eq, _ := bv.Equals(av).UnmarkDeep(); eq.IsKnown() && eq.True() {
				if c.Action == planner.Update || c.Action.IsReplace() {
					if n == "id" || n == "name" {
						l = line{" ", n, formatValue(bv, 8)}
					} else {
						hidden++
						continue
					}
				} else {
					l = line{" ", n, formatValue(bv, 8)}
				}
			} else if d, ok := diffList(bv, av, 8, col); ok {
				l = line{col.symbol(planner.Update), n, d}
			} else {
				l = line{col.symbol(planner.Update), n, formatValue(bv, 8) + " -> " + formatValue(av, 8)}
			}
		}
		if sensitive[n] {
			l.val = "(sensitive value)"
		}
		if forces[n] {
			l.val += col.red(" # forces replacement")
		}
		if len(n) > width {
			width = len(n)
		}
		lines = append(lines, l)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "      %s %-*s = %s\n", l.sym, width, l.name, l.val)
	}
	if hidden > 0 {
		word := "attributes"
		if hidden == 1 {
			word = "attribute"
		}
		fmt.Fprintf(w, "        # (%d unchanged %s hidden)\n", hidden, word)
	}
}

func getAttr(v cty.Value, name string) cty.Value {
	if v == cty.NilVal || v.IsNull() {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	if !v.IsKnown() {
		return cty.DynamicVal
	}
	if !v.Type().IsObjectType() || !v.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v.GetAttr(name)
}

// formatValue renders a value in HCL syntax; indent is the column of the
// enclosing attribute, used for multi-line collections.
func formatValue(v cty.Value, indent int) string {
	if v == cty.NilVal {
		return "null"
	}
	if !v.IsKnown() {
		return "(known after apply)"
	}
	if v.IsMarked() {
		return sensitiveText
	}
	if v.IsNull() {
		return "null"
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return strconv.Quote(v.AsString())
	case ty == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() {
			i, _ := bf.Int(nil)
			return i.String()
		}
		return bf.Text('f', -1)
	case ty == cty.Bool:
		if v.True() {
			return "true"
		}
		return "false"
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		if v.LengthInt() == 0 {
			return "[]"
		}
		var b strings.Builder
		b.WriteString("[\n")
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			fmt.Fprintf(&b, "%s%s,\n", strings.Repeat(" ", indent+2), formatValue(ev, indent+2))
		}
		b.WriteString(strings.Repeat(" ", indent) + "]")
		return b.String()
	case ty.IsMapType() || ty.IsObjectType():
		if v.LengthInt() == 0 {
			return "{}"
		}
		keys := []string{}
		vals := map[string]cty.Value{}
		width := 0
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			ks := k.AsString()
			if !hclIdent(ks) {
				ks = strconv.Quote(ks)
			}
			keys = append(keys, ks)
			vals[ks] = ev
			if len(ks) > width {
				width = len(ks)
			}
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s%-*s = %s\n", strings.Repeat(" ", indent+2), width, k, formatValue(vals[k], indent+2))
		}
		b.WriteString(strings.Repeat(" ", indent) + "}")
		return b.String()
	}
	return v.GoString()
}

func hclIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && (r == '-' || (r >= '0' && r <= '9'))) {
			continue
		}
		return false
	}
	return true
}

// diffList renders the change between two known lists element by element:
// removed elements with "-", added with "+", unchanged ones hidden.
func diffList(before, after cty.Value, indent int, col colorizer) (string, bool) {
	isList := func(v cty.Value) bool {
		t := v.Type()
		return !v.IsMarked() && v.IsWhollyKnown() && !v.IsNull() && (t.IsListType() || t.IsTupleType() || t.IsSetType())
	}
	if !isList(before) || !isList(after) {
		return "", false
	}
	bs, as := before.AsValueSlice(), after.AsValueSlice()
	contains := func(list []cty.Value, v cty.Value) bool {
		for _, x := range list {
			if x.RawEquals(v) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	b.WriteString("[\n")
	pad := strings.Repeat(" ", indent+2)
	unchanged := 0
	for _, v := range bs {
		if !contains(as, v) {
			fmt.Fprintf(&b, "%s%s %s,\n", pad, col.red("-"), formatValue(v, indent+4))
		} else {
			unchanged++
		}
	}
	for _, v := range as {
		if !contains(bs, v) {
			fmt.Fprintf(&b, "%s%s %s,\n", pad, col.green("+"), formatValue(v, indent+4))
		}
	}
	if unchanged > 0 {
		word := "elements"
		if unchanged == 1 {
			word = "element"
		}
		fmt.Fprintf(&b, "%s  # (%d unchanged %s hidden)\n", pad, unchanged, word)
	}
	b.WriteString(strings.Repeat(" ", indent) + "]")
	return b.String(), true
}
