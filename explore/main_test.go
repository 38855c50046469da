package explore

import (
	"testing"

	"go.uber.org/goleak"
)

// Every search joins its workers before it returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
