package core_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The core starts no goroutine; this keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
