// Package sessiongrain is the Session grain's Proto.Actor binding: the grain client
// (GetSessionGrainClient), the cluster kind (NewSessionKind) and the Session interface
// the session actor implements, generated from grain.proto by protoc-gen-go-grain, plus
// the grain's error helpers (errors.go). The request and response types are package
// messages', which links no actor framework, so the session core and any program that
// only reads events do not link Proto.Actor.
package sessiongrain
