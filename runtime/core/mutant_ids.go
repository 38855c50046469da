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
	mutDeadHolderKept                               // a dead user's forks are not reclaimed
	mutOwnerDeathNotToFetches                       // an owner's death does not fail the fetches waiting on it
	mutDeadChildPinned                              // a dead child stays pinned on its parent
	mutNoTombstone                                  // a freed value leaves no tombstone
	mutTimedOutDeleteEarly                          // a timed-out remote's delete leaves before its RemoteRet
	mutAckUnrecorded                                // the owner acks a fork request without counting the fork
	mutSelfFetchSent                                // the owner fails its own waiting fetch with a message to itself
	mutCutRefused                                   // a cut handle cannot be passed, returned or duplicated (the call fails)
	mutRefuseAfterCrash                             // after any crash the owner refuses every fork request
	mutMergedAckNotCarried                          // a held-back RemoteRet is dropped when the creator's fetch is answered, which does not confirm
	mutAckCarriedToAnyFork                          // a held-back RemoteRet rides on the answer to a fetch through another fork
	mutResentRemoteRunsAgain                        // a resent RemoteCall of a value that exists runs its function a second time
	mutPendingReleasedUncounted                     // pending_users leaves out the released users still awaiting their confirmation
)
