package main

func Example() {
	main()
	// Output: completed with 2 subagents: The parser reads YAML; The writer emits JSON.
}
