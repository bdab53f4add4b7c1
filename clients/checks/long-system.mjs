// A system prompt long enough to be cached (the APIs cache nothing below
// 1,024 tokens): about 2,000 tokens of numbered, distinct lines.
export const longSystem = Array.from({ length: 160 }, (_, i) =>
  `Rule ${i + 1}: answer weather questions with the get_weather tool, never from memory.`).join('\n');
