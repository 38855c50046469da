package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestLocalTraining(t *testing.T) {
	var out bytes.Buffer
	if err := runLocal(&out, 2, 20); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "loss after 40 updates: 0.0000") || !strings.Contains(out.String(), "no parameter snapshot leaked") {
		t.Fatalf("training did not converge or leaked:\n%s", out.String())
	}
}
