/**
 * The built-in inference-server simulator: every streaming API of DESIGN.md section 4 (OpenAI chat,
 * completions and Responses, Anthropic Messages, TGI, Ollama, llama.cpp, Triton) with configurable
 * timing, chunking and faults, for the demo, the tests and the benchmarks.
 */
export { startSimulator } from './server.js';
export type { RequestClosedEvent, RequestEnd, RunningSimulator, SimulatorEvents, SimulatorStats } from './server.js';
export { SIM_HEADER, parseSimulatorFlags, simulatorFlagsHelp } from './options.js';
export type { SimulatorOptions, UsageMode } from './options.js';
export { ENDPOINTS_HELP as simulatorEndpointsHelp } from './routes.js';
