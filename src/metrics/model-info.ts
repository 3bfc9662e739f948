import type { Meter } from '@opentelemetry/api';
import { ATTR, MODEL_INFO } from './definitions.js';
import type { ModelLabels } from './model-labels.js';

/**
 * tokentap_model_info{gen_ai_request_model, base_model} 1 for each model label value discovery
 * knows the base of (ModelLabels.modelInfo: at most metrics.max_models), observed on every
 * collection: a name no longer listed stops being observed and its series leaves the exposition.
 */
export function registerModelInfo(meter: Meter, models: ModelLabels): void {
  meter
    .createObservableGauge(MODEL_INFO.otelName, { unit: MODEL_INFO.unit, description: MODEL_INFO.description })
    .addCallback((result) => {
      for (const [model, baseModel] of models.modelInfo()) result.observe(1, { [ATTR.model]: model, base_model: baseModel });
    });
}
