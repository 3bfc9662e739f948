/**
 * The built-in inference-server simulator: vLLM's OpenAI-compatible API with configurable timing,
 * chunking and faults, for the demo, the tests and the benchmarks.
 */
export { startSimulator } from './server.js';
export type { RequestClosedEvent, RequestEnd, RunningSimulator, SimulatorEvents, SimulatorStats } from './server.js';
export { SIM_HEADER, parseSimulatorFlags, simulatorFlagsHelp } from './options.js';
export type { SimulatorOptions, UsageMode } from './options.js';
