package main

import "os"

// modelFlagHelp documents --model for every command that runs agents.
const modelFlagHelp = `model to run: "fake" (offline demo), anthropic:MODEL, openai:MODEL or ollama:MODEL (default $DEPUTY_MODEL)`

// noModelHelp is printed when no model is configured: it says exactly what
// to do, because this is the first thing a new user sees.
const noModelHelp = `no model configured.

  Try deputy offline, on its built-in scripted model:
      deputy run --model fake "summarize this directory"

  Use a real model with --model or $DEPUTY_MODEL:
      export ANTHROPIC_API_KEY=...   then  --model anthropic:claude-sonnet-4-5
      export OPENAI_API_KEY=...      then  --model openai:gpt-4.1
      (Ollama on localhost:11434)    then  --model ollama:llama3.1
  ANTHROPIC_BASE_URL / OPENAI_BASE_URL point the clients at another server,
  such as one started with "deputy fakellm".`

// rootSpec is the --model value, or $DEPUTY_MODEL.
func rootSpec(flag string) (string, error) {
	if flag == "" {
		flag = os.Getenv("DEPUTY_MODEL")
	}
	if flag == "" {
		return "", usageErr("%s", noModelHelp)
	}
	return flag, nil
}
