// Package classad implements the HTCondor ClassAd language: parsing of
// expressions and ads in the old ("Name = Expr" lines), new ("[ a = 1; ]")
// and JSON syntaxes, printing in all three, evaluation with HTCondor's
// semantics, symmetric matching of two ads, and a compiled fast path for
// evaluating one expression against many ads without allocating.
//
// # Using it
//
//	e, err := classad.ParseExpr(`TARGET.Memory >= MY.RequestMemory`)
//	job, err := classad.ParseAd(jobText)      // old, new or JSON syntax
//	v := classad.EvalWith(e, job, machine)    // MY = job, TARGET = machine
//	ok := classad.Match(job, machine)         // both Requirements hold
//	r := classad.Rank(job, machine)           // job's Rank of machine
//
//	p, err := classad.Compile(requirements)  // hot path: compile once,
//	for _, m := range machines {             // evaluate many times,
//		if p.EvalBool(job, m) { ... }        // 0 allocations per call
//	}
//
// Values are of kind undefined, error, boolean, integer, real, string,
// list, classad, abstime or reltime; arithmetic promotes integers (and
// booleans) to reals, division by zero is error, == compares strings
// case-insensitively, =?= (is) and =!= (isnt) are strict and
// case-sensitive, and && || ! ?: are three-valued as in HTCondor.
//
// # Scoping
//
// A bare attribute name is looked up in the ad holding the expression,
// then in its enclosing ads, then, in a match, in the other ad (HTCondor's
// default, non-strict evaluation). MY is the ad holding the expression,
// TARGET the other ad of the match, PARENT the enclosing ad; a bare
// CurrentTime not defined by either ad is the current time. A reference
// that loops back on itself is ERROR, as the manual's evaluation semantics
// say (HTCondor's library returns UNDEFINED there); evaluation is also
// bounded in depth and in the number of attribute evaluations, so no ad
// can make it hang.
//
// # Conformance
//
// The semantics were checked against HTCondor 25's own ClassAd library
// through its Python bindings: a table of 552 expressions
// (testdata/conformance.txt) and a differential test that evaluates
// thousands of random expressions in both. Known, deliberate differences:
//
//   - Integer literals with a leading 0 are octal and 0x are hexadecimal,
//     as the language reference describes; the reference library reads
//     "010" as 10 and "0x10" as 0.
//   - Regular expressions use Go's RE2 syntax rather than PCRE:
//     back-references and look-around are not supported. Plain literal
//     patterns (optionally anchored) keep PCRE's "$ matches before a final
//     newline".
//   - Lists are evaluated eagerly: functions that print a list (string,
//     strcat, toUpper, join, strcmp, versionCmp) print its values where
//     HTCondor prints the unevaluated element expressions.
//   - unparse() of a nested ad or list returns the one-line form.
//   - pow with a non-integral exponent may differ from C's pow in the last
//     bit.
//   - Attribute order: ads print in insertion order (HTCondor prints in
//     hash order).
//
// The string-list functions (stringListSize … stringListRegexpMember),
// split, splitUserName, splitSlotName, evalInEachContext, countMatches,
// envV1ToV2 and mergeEnvironment follow the manual; the reference bindings
// do not register them. userMap has no map files in pond: users are
// unmapped, so it returns its default group argument or undefined.
package classad
