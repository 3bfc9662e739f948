import { TokentapError } from '../errors.js';
import { parseSimulatorFlags, startSimulator } from '../simulator/index.js';
import type { CliIO } from './main.js';

/** `tokentap simulate`: the built-in inference-server simulator, until stopped. */
export async function runSimulate(argv: readonly string[], io: CliIO, stopped: Promise<void>): Promise<number> {
  let options;
  try {
    options = parseSimulatorFlags([...argv]);
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  const simulator = await startSimulator(options);
  io.stdout.write(`tokentap simulator (vLLM OpenAI-compatible API) listening on ${simulator.url}\n`);
  await stopped;
  await simulator.close();
  return 0;
}
