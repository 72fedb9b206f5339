package agentrl

// Version is the version of the agentrl module. It follows semantic
// versioning; while the major version is 0, exported APIs may change
// between minor versions.
const Version = "0.1.0-dev"
