package main

func Example() {
	main()
	// Output:
	// parser (completed): The parser reads YAML.
	// writer (completed): The writer emits JSON.
	// compare (completed): They disagree: YAML in, JSON out.
}
