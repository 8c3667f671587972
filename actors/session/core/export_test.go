package core

// CloneStep exposes cloneStep (the copy Apply makes of a step it changes) to the tests.
var CloneStep = cloneStep
