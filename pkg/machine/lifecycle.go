package machine

// transitions lists, for each state, the states it may move to. Every move
// is an event with a reason (pkg/fleet writes both at once); anything else
// is refused.
var transitions = map[State][]State{
	StateDiscovered:   {StateEnrolled, StateInspecting, StateProvisioning},
	StateEnrolled:     {StateInspecting, StateProvisioning, StateFailed},
	StateInspecting:   {StateProvisioning, StateEnrolled, StateFailed},
	StateProvisioning: {StateVerifying, StateFailed},
	StateVerifying:    {StateReady, StateFailed},
	StateReady:        {StateReimaging},
	StateFailed:       {StateReimaging, StateEnrolled},
	StateReimaging:    {StateProvisioning, StateFailed},
}

// CanTransition reports whether a machine may move from one state to another.
// Staying in the same state is always allowed (a resumed step repeats it).
func CanTransition(from, to State) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Next lists the states a machine in state s may move to.
func Next(s State) []State { return append([]State(nil), transitions[s]...) }
