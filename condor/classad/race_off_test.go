//go:build !race

package classad

const raceEnabled = false
