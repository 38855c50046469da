//go:build !rrefmutants

package core

func mutant(mutantID) bool { return false }
