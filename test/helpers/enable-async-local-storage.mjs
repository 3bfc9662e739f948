// Preloaded with `node --import`: an AsyncLocalStorage in use from the start, as an OpenTelemetry
// context manager (or an APM agent) makes one. Every async resource created afterwards gets the
// active store written onto it by the storage's init hook.
import { AsyncLocalStorage } from 'node:async_hooks';

const storage = new AsyncLocalStorage();
storage.enterWith({ preloaded: true });
