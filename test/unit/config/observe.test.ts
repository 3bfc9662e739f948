import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';

describe('TOKENTAP_OBSERVE', () => {
  it('is on when unset, empty or "on", off when "off"', () => {
    expect(loadSettings({ flags: {}, env: {} }).observe).toBe(true);
    expect(loadSettings({ flags: {}, env: { TOKENTAP_OBSERVE: '' } }).observe).toBe(true);
    expect(loadSettings({ flags: {}, env: { TOKENTAP_OBSERVE: 'on' } }).observe).toBe(true);
    expect(loadSettings({ flags: {}, env: { TOKENTAP_OBSERVE: 'off' } }).observe).toBe(false);
  });

  it('refuses any other value, naming the variable', () => {
    expect(() => loadSettings({ flags: {}, env: { TOKENTAP_OBSERVE: 'false' } })).toThrow(/TOKENTAP_OBSERVE: expected on or off, got "false"/);
  });
});
