/* The one shape a harmony (gpt-oss) tool call has in an answer's text.
 * The model addresses a call by the recipient in its message's header
 * (to=functions.NAME, after the role or after the channel, with or without
 * <|constrain|>json), which the reasoning split (reasoning.c) reads while it
 * drops headers. So that the header is read in that one place, the split
 * writes each message to a function in this shape, the one gpt-oss's
 * template renders an assistant's call in, and the tool-call parser
 * (tool_calls.c) reads only this shape:
 *   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGUMENTS<|call|>
 * The model's own <|call|> ends its turn (an end-of-generation token, never
 * in the generated text): the split closes the shape when the message ends,
 * whatever ends it. */
#ifndef BMOE_CHAT_HARMONY_CALL_H
#define BMOE_CHAT_HARMONY_CALL_H

#define HARMONY_FUNCTIONS "functions."
#define HARMONY_CALL_OPEN "<|start|>assistant to=" HARMONY_FUNCTIONS
#define HARMONY_CALL_HEADER_END "<|channel|>commentary json<|message|>"
#define HARMONY_CALL_CLOSE "<|call|>"

#endif
