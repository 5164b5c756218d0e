/**
 * The typed results of MemoroClient's calls, with the names of memoro's
 * Python results in camelCase and times as Dates, and how each is read from
 * the server's answer (typed by src/generated/openapi.ts, so a change of the
 * API breaks the build here rather than a caller at run time).
 */
// -- reading the server's answers ------------------------------------------------
export function storedBlock(userId, data) {
    if (data.updated_at === null || data.updated_by === null)
        return null;
    return {
        userId,
        text: data.block,
        count: data.count,
        limit: data.limit,
        etag: data.etag,
        updatedAt: new Date(data.updated_at),
        updatedBy: data.updated_by,
    };
}
export function writeResult(data) {
    return {
        outcome: data.outcome,
        saved: data.saved,
        rejected: data.outcome === "too_long" || data.outcome === "empty",
        block: data.block || null,
        count: data.count,
        attemptedCount: data.attempted_count,
        limit: data.limit,
        overBy: data.over_by,
        removed: data.removed,
        added: data.added,
        warnings: data.warnings,
        etag: data.etag,
    };
}
export function deleteResult(data) {
    return { deleted: data.deleted, removedCount: data.removed_count };
}
export function userDeletion(data) {
    return {
        block: data.block,
        auditEntries: data.audit_entries,
        conversations: data.conversations,
        turns: data.turns,
        imports: data.imports,
    };
}
export function auditEntry(userId, data) {
    return {
        id: data.id,
        userId,
        at: new Date(data.at),
        writer: data.writer,
        operation: data.operation,
        source: data.source ?? null,
        removedLines: data.removed_lines,
        addedLines: data.added_lines,
        removedCount: data.removed_count,
        addedCount: data.added_count,
    };
}
export function proposal(userId, data) {
    return {
        userId,
        block: data.block,
        count: data.count,
        limit: data.limit,
        etag: data.etag,
        basedOn: data.based_on,
        removed: data.removed,
        added: data.added,
        createdAt: new Date(data.created_at),
        turnsRead: data.turns_read,
        turnsUnread: data.turns_unread,
        stale: data.stale,
        applied: data.applied,
    };
}
export function systemPrompt(data) {
    const { text, stable, memory, today, openai, anthropic } = data;
    return { text, stable, memory, today, openai, anthropic };
}
export function recordedTurn(data) {
    return {
        turnId: data.turn_id,
        conversationId: data.conversation,
        seq: data.seq,
        created: data.created,
    };
}
export function searchHits(data) {
    return {
        hits: data.hits.map((hit) => ({
            turnId: hit.turn_id,
            seq: hit.seq,
            conversationId: hit.conversation,
            at: new Date(hit.at),
            text: hit.text,
            score: hit.score,
        })),
        warnings: data.warnings,
    };
}
export function conversation(data) {
    return {
        id: data.id,
        turns: data.turns,
        firstAt: new Date(data.first_at),
        lastAt: new Date(data.last_at),
        title: data.title,
        preview: data.preview,
    };
}
export function turn(userId, data) {
    return {
        id: data.id,
        userId,
        conversationId: data.conversation,
        seq: data.seq,
        question: data.question,
        answer: data.answer,
        at: new Date(data.at),
        indexed: data.indexed,
    };
}
export function toolResult(data) {
    return { text: data.text, isError: data.is_error };
}
export function toolDefinition(data) {
    const { name, description, parameters } = data.function;
    return { name, description, parameters };
}
export function importStatus(data) {
    const report = data.report;
    return {
        id: data.id,
        fileName: data.file_name,
        format: data.format,
        size: data.size,
        status: data.status,
        readBytes: data.read_bytes,
        report: report && {
            format: report.format,
            conversations: report.conversations,
            turns: report.turns,
            imported: report.imported,
            alreadyThere: report.already_there,
            skipped: report.skipped,
            unknownTypes: report.unknown_types,
            failed: report.failed,
            problems: report.problems,
            block: report.block,
        },
        error: data.error,
        createdAt: new Date(data.created_at),
        finishedAt: data.finished_at === null ? null : new Date(data.finished_at),
    };
}
