package clients

// TEMPORARY: the Vercel AI SDK checks are being written.
func aiSDKChecks() []check { return nil }
