package engine

import "github.com/ingot-dev/ingot/pkg/store"

// Jobs are the store's records; transports name them through the engine.
type (
	// Job is persisted work that survives a restart: a reimage, a rollout.
	Job = store.Job
	// JobState is where a job stands.
	JobState = store.JobState
)

// Job states.
const (
	JobPending   = store.JobPending
	JobRunning   = store.JobRunning
	JobSucceeded = store.JobSucceeded
	JobFailed    = store.JobFailed
	JobCancelled = store.JobCancelled
)
