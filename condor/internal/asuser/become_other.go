//go:build !linux

package asuser

import "errors"

func become(*Account) error {
	return errors.New("acting as another user is supported on Linux only")
}
