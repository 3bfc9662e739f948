import { parseSimulatorFlags, simulatorEndpointsHelp, simulatorFlagsHelp, startSimulator } from '../simulator/index.js';
import type { CliIO } from './main.js';

/** `tokentap simulate`: the built-in inference-server simulator, until stopped. */
export async function runSimulate(argv: readonly string[], io: CliIO, stopped: Promise<void>): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`Usage: tokentap simulate [flags]\n\nEndpoints:\n${simulatorEndpointsHelp}\n\nFlags:\n${simulatorFlagsHelp()}\n`);
    return 0;
  }
  // Throws TOKENTAP_ERR_USAGE naming the flag; main() reports it.
  const simulator = await startSimulator(parseSimulatorFlags([...argv]));
  io.stdout.write(`tokentap simulator (OpenAI, Anthropic, TGI, Ollama, llama.cpp and Triton APIs) listening on ${simulator.url}\n`);
  if (simulator.h2cUrl !== undefined) io.stdout.write(`tokentap simulator h2c (gRPC: vLLM Generate, Triton ModelStreamInfer; and every HTTP API) listening on ${simulator.h2cUrl}\n`);
  await stopped;
  await simulator.close();
  return 0;
}
