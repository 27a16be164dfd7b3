// Package backendtest checks that a state backend keeps the state.Backend
// contract: reading a missing state, round trips, the serial rule, the
// previous document kept as a backup, refusing documents it cannot read,
// locking and unlocking, waiting for a lock, and writers in several
// goroutines and processes at once.
//
// A backend's tests run the suite with Run, giving it fresh storage for
// every case, and call RunHelper first thing in TestMain so that the test
// binary can serve as the suite's helper processes:
//
//	func TestMain(m *testing.M) {
//		backendtest.RunHelper(func(ctx context.Context) (state.Backend, error) {
//			return local.New(os.Getenv("POND_STATE_PATH")), nil
//		})
//		os.Exit(m.Run())
//	}
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backendtest.Store { ... })
//	}
package backendtest

import (
	"testing"

	"github.com/pond-htc/pond/state"
)

// Object is one of the documents a backend keeps for a state.
type Object int

// The documents a backend keeps.
const (
	// StateObject is the state document.
	StateObject Object = iota
	// BackupObject is the previous state document.
	BackupObject
	// LockObject holds the lock's state.LockInfo as JSON while the state
	// is locked.
	LockObject
)

// String names the object.
func (o Object) String() string {
	switch o {
	case StateObject:
		return "state"
	case BackupObject:
		return "backup"
	case LockObject:
		return "lock"
	}
	return "unknown object"
}

// Store is one fresh, empty storage location of the backend under test (a
// state file in a new directory, a key in a new bucket), with direct access
// to the documents the backend keeps there.
type Store interface {
	// Open returns a backend on the store. Every call returns a backend of
	// its own, sharing nothing in memory with the others, as the backend
	// of another process would.
	Open(t *testing.T) state.Backend
	// Location is how the backend names the state in its errors and in
	// state.LockInfo.Path: a file name, an s3:// URL.
	Location() string
	// Get returns the stored content of obj and whether it exists.
	Get(t *testing.T, obj Object) ([]byte, bool)
	// Put stores data as obj, bypassing the backend.
	Put(t *testing.T, obj Object, data []byte)
	// Env is the environment (NAME=value entries) from which the open
	// function given to RunHelper, in a helper process, opens this store.
	Env() []string
}

// NewStore returns a fresh, empty store of the backend under test. It may
// skip the test, when the backend's service is not available.
type NewStore func(t *testing.T) Store

// Run runs the conformance suite, each case (and each case of a table) on
// stores of its own.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, newStore NewStore)
	}{
		{"ReadMissing", testReadMissing},
		{"RoundTrip", testRoundTrip},
		{"NoSharedMemory", testNoSharedMemory},
		{"Serial", testSerial},
		{"History", testHistory},
		{"Backup", testBackup},
		{"BadDocuments", testBadDocuments},
		{"NilState", testNilState},
		{"CancelledContext", testCancelledContext},
		{"Lock", testLock},
		{"LockFillsInfo", testLockFillsInfo},
		{"Unlock", testUnlock},
		{"ForceUnlock", testForceUnlock},
		{"UnreadableLock", testUnreadableLock},
		{"LockWait", testLockWait},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentReaders", testConcurrentReaders},
		{"HolderInAnotherProcess", testHolderInAnotherProcess},
		{"DeadHolder", testDeadHolder},
		{"WritersInProcesses", testWritersInProcesses},
		{"KilledWriter", testKilledWriter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore)
		})
	}
}
