package core

// mutantID names a seeded protocol bug. Mutants exist only in builds with the
// rrefmutants tag (see mutants_on.go); in every other build mutant() is a
// constant false and the checks compile away.
type mutantID int

const (
	mutNoPin                    mutantID = iota + 1 // G2 off: a parent does not pin its child
	mutCreatorDeleteNotDeferred                     // the creator's delete leaves before RemoteRet
	mutOwnerDeletesOnFirst                          // the owner frees on the first delete
	mutForkRequestDropped                           // a fork request before the value exists is dropped
	mutChildAcceptEarly                             // the child accepts before the owner confirmed it
	mutLateRemoteRecreates                          // a late RemoteCall re-creates a freed value
	mutPendingReleaseNoDelete                       // a pending user released sends no delete
	mutDuplicateForkCounted                         // a duplicate fork request is counted twice
	mutDeletedForUnknownFork                        // a freed value answers a fork it never knew (a cut child) deleted, not lost
)
