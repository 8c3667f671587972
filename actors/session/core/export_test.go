package core

// CloneStep exposes cloneStep (the copy Apply makes of a step it changes).
var CloneStep = cloneStep

// CloneSubAgent exposes cloneSubAgent (the copy Apply makes of a sub-agent it changes).
var CloneSubAgent = cloneSubAgent

// RememberCommand exposes rememberCommand (Apply's record of a command's last event).
var RememberCommand = rememberCommand
