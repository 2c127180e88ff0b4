package baselines

// RunLevel is one level as one repeat of a sweep measured it.
type RunLevel struct {
	// Repeat numbers the sweep's repetitions from 1.
	Repeat int
	Level
}
