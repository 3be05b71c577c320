package runtime

import "errors"

// ErrDeviceLost is matched (errors.Is) by errors that mean the device is
// gone (a remote server died or stopped answering): nothing more can run
// on it, so callers that go through many cases stop at the first.
var ErrDeviceLost = errors.New("device lost")

// Lost marks err as the loss of the device; its message is err's.
func Lost(err error) error { return lostError{err} }

type lostError struct{ error }

func (e lostError) Unwrap() []error { return []error{e.error, ErrDeviceLost} }
