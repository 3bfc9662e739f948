import pino, { type Logger } from 'pino';

/**
 * One JSON line per request (and a few lifecycle lines). Asynchronous destination: a log write
 * never blocks the event loop that forwards streams. Headers are never logged; the redaction list
 * is a second guard should a header object ever be passed by mistake.
 */
export function createLogger(level: string, destination: NodeJS.WritableStream | number = 1): Logger {
  const stream = typeof destination === 'number' ? pino.destination({ dest: destination, sync: false }) : destination;
  return pino(
    {
      level,
      base: { service: 'tokentap' },
      redact: {
        paths: ['*.authorization', '*.cookie', '*["x-api-key"]', '*["proxy-authorization"]', 'headers'],
        remove: true,
      },
    },
    stream,
  );
}
