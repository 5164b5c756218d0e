/**
 * memoroTools: memoro's tools as Vercel AI SDK tools, with the names,
 * descriptions and JSON Schemas the server defines (fetched from it, so a
 * tool the server adds is offered without a change here). Each call runs on
 * the server for the one user the host authenticated, and the model reads
 * memoro's own result text.
 */
import { InvalidUser } from "../errors.js";
/** `{ memory_write, memory_delete_all, conversation_search, … }` for `generateText({ tools })`. */
export async function memoroTools({ client, userId, }) {
    confirmedUser(userId, "memoroTools");
    const definitions = await client.toolDefinitions();
    return Object.fromEntries(definitions.map((definition) => [
        definition.name,
        {
            description: definition.description,
            inputSchema: schema(definition.parameters),
            execute: async (input) => (await client.executeTool(userId, definition.name, input)).text,
        },
    ]));
}
/**
 * The tool's JSON Schema as a Standard Schema. It lets every input through:
 * the server checks the arguments and answers a bad call with a result
 * that tells the model what to send instead.
 */
function schema(parameters) {
    const json = () => structuredClone(parameters);
    return {
        "~standard": {
            version: 1,
            vendor: "memoro",
            validate: (value) => ({ value: value }),
            jsonSchema: { input: json, output: json },
        },
    };
}
/** The glue acts for one user the host confirmed, never for none. */
export function confirmedUser(userId, what) {
    if (typeof userId !== "string" || userId === "") {
        throw new InvalidUser(`${what} needs the id of the user your app authenticated (got ${JSON.stringify(userId)});` +
            " without a confirmed user, do not offer memoro for this request");
    }
}
