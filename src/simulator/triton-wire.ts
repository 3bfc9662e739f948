import {
  countPromptTokens,
  isRecord,
  parseJsonObject,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';

/**
 * NVIDIA Triton Inference Server's generate extension,
 * `POST /v2/models/{model}[/versions/{version}]/generate_stream` and `.../generate`, after its
 * documentation (docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/protocol/
 * extension_generate.html):
 *
 * - The request is a JSON object whose keys name the model's inputs (`text_input`, and for
 *   TensorRT-LLM or vLLM models `max_tokens`, at the top level or under `parameters`).
 * - `/generate_stream`: `Content-Type: text/event-stream; charset=utf-8`, one `data: <json>\n\n`
 *   per response the model sends: `{"model_name","model_version","text_output"}`, the text being
 *   the new tokens only. Nothing marks the end: the stream just ends after the last response.
 * - `/generate`: the same object once, with the whole text, `application/json`.
 * - Errors: `{"error":"..."}`; an inference error after the head was sent arrives as a data event
 *   holding that object.
 */

const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';
const JSON_CONTENT_TYPE = 'application/json';
/** The version Triton reports for a model whose path names none: its only (latest) version. */
const DEFAULT_VERSION = '1';

function invalid(message: string): { readonly problem: RequestProblem } {
  return { problem: { status: 400, message } };
}

function errorJson(message: string): string {
  return JSON.stringify({ error: message });
}

function tritonProtocol(stream: boolean): Protocol {
  return {
    parse: (bodyText, params) => {
      const parsed = parseJsonObject(bodyText);
      if ('message' in parsed) return invalid(`failed to parse the request JSON buffer: ${parsed.message}`);
      const { body } = parsed;
      const textInput = body['text_input'];
      if (typeof textInput !== 'string') {
        return invalid(`expected 1 inputs but got 0 inputs for model '${params['model'] ?? ''}'. Got input(s) [], but missing required input(s) ['text_input']`);
      }
      const parameters = body['parameters'] ?? {};
      if (!isRecord(parameters)) return invalid('parameters: expected a JSON object');
      const maxTokens = body['max_tokens'] ?? parameters['max_tokens'];
      if (maxTokens !== undefined && (!Number.isInteger(maxTokens) || (maxTokens as number) < 1)) {
        return invalid("unable to parse 'max_tokens': expected a positive integer");
      }
      return {
        request: {
          model: params['model'],
          stream,
          maxTokens: maxTokens as number | undefined,
          promptTokens: countPromptTokens([textInput]),
        },
      };
    },

    errorResponse: (_status, message) => ({ contentType: JSON_CONTENT_TYPE, body: errorJson(message) }),

    respond: (_request, context, params): ResponseWriter => {
      const version = params['version'] ?? DEFAULT_VERSION;
      const output = (text: string): string =>
        JSON.stringify({ model_name: context.model, model_version: version, text_output: text });
      return {
        streamContentType: SSE_CONTENT_TYPE,
        keepAlive: undefined,
        open: () => [],
        // The end-of-sequence step sends nothing: the stream simply ends.
        step: (tokens) => (tokens.length > 0 ? [`data: ${output(tokens.join(''))}\n\n`] : []),
        streamError: (message) => [`data: ${errorJson(message)}\n\n`],
        body: (tokens) => ({ contentType: JSON_CONTENT_TYPE, body: output(tokens.join('')) }),
      };
    },
  };
}

export const TRITON_GENERATE_STREAM: Protocol = tritonProtocol(true);
export const TRITON_GENERATE: Protocol = tritonProtocol(false);
