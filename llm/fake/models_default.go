package fake

// defaultModels are the ids GET /v1/models lists when the Responder names
// none, newest first: the current (not deprecated) model ids the official
// SDKs declare, read 2026-12-02 from anthropic-sdk-go v2.15.0 message.go
// (Model constants) and openai-go v3.98.0 shared/shared.go (ChatModel
// constants). They match cost's built-in price table, so each one listed
// is priced.
var defaultModels = map[Provider][]string{
	Anthropic: {
		"claude-fable-5-2", "claude-mythos-5-2",
		"claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5",
		"claude-fable-5-1", "claude-mythos-5-1",
		"claude-sonnet-5", "claude-fable-5", "claude-mythos-5", "claude-opus-5",
		"claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6",
		"claude-sonnet-4-6", "claude-haiku-4-5",
	},
	OpenAI: {
		"gpt-6-astra", "gpt-6.1-sol", "gpt-6-sol", "gpt-6-luna",
		"gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna",
		"gpt-5.4-nano",
	},
}
