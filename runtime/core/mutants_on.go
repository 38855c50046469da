//go:build rrefmutants

package core

// Mutants lists the seeded bugs by name, for the conformance suite's teeth test.
var Mutants = map[string]mutantID{
	"no-pin":                      mutNoPin,
	"creator-delete-not-deferred": mutCreatorDeleteNotDeferred,
	"owner-deletes-on-first":      mutOwnerDeletesOnFirst,
	"fork-request-dropped":        mutForkRequestDropped,
	"child-accept-early":          mutChildAcceptEarly,
	"late-remote-recreates":       mutLateRemoteRecreates,
	"pending-release-no-delete":   mutPendingReleaseNoDelete,
	"duplicate-fork-counted":      mutDuplicateForkCounted,
	"deleted-for-unknown-fork":    mutDeletedForUnknownFork,
	"dead-holder-kept":            mutDeadHolderKept,
	"owner-death-not-to-fetches":  mutOwnerDeathNotToFetches,
	"dead-child-pinned":           mutDeadChildPinned,
	"no-tombstone":                mutNoTombstone,
	"timed-out-delete-early":      mutTimedOutDeleteEarly,
	"ack-unrecorded":              mutAckUnrecorded,
	"self-fetch-sent":             mutSelfFetchSent,
	"cut-refused":                 mutCutRefused,
	"refuse-after-crash":          mutRefuseAfterCrash,
	"merged-ack-not-carried":      mutMergedAckNotCarried,
	"ack-carried-to-any-fork":     mutAckCarriedToAnyFork,
	"resent-remote-runs-again":    mutResentRemoteRunsAgain,
	"pending-released-uncounted":  mutPendingReleasedUncounted,
}

var activeMutant mutantID

// SetMutant turns one seeded bug on (0 turns all off). Not safe for concurrent use.
func SetMutant(m mutantID) { activeMutant = m }

func mutant(m mutantID) bool { return activeMutant == m }

// ActiveMutant is the bug seeded now (0: none), for caches of the core's
// behaviour that must not outlive it.
func ActiveMutant() int { return int(activeMutant) }
