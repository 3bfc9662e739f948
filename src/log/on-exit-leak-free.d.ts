/** on-exit-leak-free 2.1.2 (pino's exit hooks) ships no types: the part logger.ts uses. */
declare module 'on-exit-leak-free' {
  /** Calls `fn(obj, 'exit')` at the process's exit while `obj` is alive (held weakly), in registration order. */
  export function register<T extends object>(obj: T, fn: (obj: T, event: 'exit') => void): void;
  const onExit: { register: typeof register };
  export default onExit;
}
