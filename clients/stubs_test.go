package clients

// TEMPORARY: the Vercel AI SDK and CLI checks are being written.
func aiSDKChecks() []check { return nil }
func cliChecks() []check   { return nil }
