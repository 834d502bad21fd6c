// Npc.cs - four characters of a game talk through one model while a 60 fps
// loop runs: the C# form of examples/npc.c.
//
// One context of four sequences holds the four conversations; the replies
// decode together (each forward pass takes a token of every character that
// is talking). Each reply is constrained by a JSON schema, {"say": ...,
// "mood": ...}, formatted with the model's chat template, and printed as it
// streams. Two ways to run the model:
//   (default)  the game thread calls Context.Step(budget) each frame: the
//              model runs inside the frame, for about --budget ms;
//   --worker   a Worker's thread runs it; the game thread only starts
//              requests and polls them.
//
//   mono Npc.exe [-m MODEL] [--frames 1000] [--budget 4] [--worker] [-t THREADS]
//                [--replies N] [--check] [--quiet]
// --replies N ends the run once every character has replied N times;
// --check exits 1 unless every reply matched the schema and each character
// replied at least once.
//
// In Unity the loop is MonoBehaviour.Update: start requests, call Step (or
// nothing, with a worker), read Request.ReadNew() into the speech bubbles.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Text;
using System.Threading;
using Infer;
using Infer.Samples;

static class Npc
{
    const double FrameMs = 1000.0 / 60.0;

    static readonly string[] Names = { "Mira", "Grok", "Elda", "Pip" };
    static readonly string[] Personas =
    {
        "a cheerful baker who loves gossip",
        "a grumpy blacksmith who distrusts strangers",
        "an old librarian who speaks in riddles",
        "a curious child who asks many questions",
    };
    static readonly string[] PlayerLines =
    {
        "Good morning! What is new in the village?",
        "Have you seen the dragon that flew over the hills last night?",
        "Can you sell me something useful for my journey?",
        "What do you think of the mayor?",
        "Tell me a secret nobody else knows.",
        "Where can I find a place to sleep tonight?",
        "Do you know the way to the old castle?",
        "Goodbye, and thank you!",
    };
    static readonly string[] Moods = { "happy", "grumpy", "sad", "curious", "afraid" };
    const string Schema = "{\"type\":\"object\",\"properties\":{" +
                          "\"say\":{\"type\":\"string\",\"maxLength\":100}," +
                          "\"mood\":{\"enum\":[\"happy\",\"grumpy\",\"sad\",\"curious\",\"afraid\"]}}," +
                          "\"required\":[\"say\",\"mood\"]}";

    sealed class Character
    {
        public int Id;
        public List<ChatMessage> Messages = new List<ChatMessage>();
        public int Fed;            // messages already in its sequence
        public bool ReplyOpen;     // its last reply is not closed by the end-of-turn text yet
        public int Positions;      // what its sequence holds, as the replies tell
        public int NextLine, WaitFrames;
        public Request Reply;
        public StringBuilder Streamed = new StringBuilder(); // the reply's text so far
        public int Shown;                                    // how much of it was printed
        public int Replies, Failed, Invalid, Tokens;
    }

    static int Main(string[] args)
    {
        string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
        int frames = 1000, threads = 2, replies = 0;
        double budget = 4;
        bool worker = false, check = false, quiet = false;
        for (int i = 0; i < args.Length; i++)
        {
            string a = args[i], v = i + 1 < args.Length ? args[i + 1] : null;
            switch (a)
            {
            case "-m": model = v; i++; break;
            case "--frames": frames = int.Parse(v); i++; break;
            case "--budget": budget = double.Parse(v, System.Globalization.CultureInfo.InvariantCulture); i++; break;
            case "-t": threads = int.Parse(v); i++; break;
            case "--replies": replies = int.Parse(v); i++; break;
            case "--worker": worker = true; break;
            case "--check": check = true; break;
            case "--quiet": quiet = true; break;
            default:
                Console.Error.WriteLine("npc: unknown option " + a);
                return 2;
            }
        }
        try
        {
            return Run(model, frames, budget, worker, threads, replies, check, quiet);
        }
        catch (InferException e)
        {
            Console.Error.WriteLine("npc: " + e.Message);
            return 1;
        }
    }

    static int Run(string modelPath, int frames, double budget, bool useWorker, int threads, int wantReplies, bool check, bool quiet)
    {
        using (var model = Model.Load(modelPath))
        using (var ctx = new Context(model, new ContextOptions { NSeq = Names.Length, NCtx = 1024, NThreads = threads }))
        {
            int nCtx = ctx.NCtx; // read now: a worker's context is used only through requests
            Worker worker = useWorker ? new Worker(1) : null;
            ChatTemplate chat = model.DetectChatTemplate();
            var npcs = new Character[Names.Length];
            for (int i = 0; i < npcs.Length; i++)
            {
                npcs[i] = new Character { Id = i, NextLine = i, WaitFrames = i * 7 };
                npcs[i].Messages.Add(SystemMessage(i));
            }
            Console.WriteLine("npc: {0}, {1} characters in one context ({2} positions each), {3}", modelPath, npcs.Length,
                              nCtx, useWorker ? "a background worker" : "stepped on the game thread, " + budget + " ms a frame");
            var inLibrary = new List<double>();
            var run = Stopwatch.StartNew();
            var clock = Stopwatch.StartNew();
            int f;
            try
            {
                for (f = 0; f < frames; f++)
                {
                    double frameStart = clock.Elapsed.TotalMilliseconds;
                    var lib = Stopwatch.StartNew();
                    foreach (var n in npcs)
                        if (n.Reply == null && n.WaitFrames-- <= 0) StartReply(n, ctx, nCtx, worker, chat);
                    if (worker == null) ctx.Step(budget);
                    foreach (var n in npcs)
                    {
                        if (n.Reply == null) continue;
                        n.Streamed.Append(n.Reply.ReadNew());
                        if (!n.Reply.IsDone)
                        {
                            // the speech bubble as it streams, four times a second
                            if (!quiet && f % 15 == 0 && n.Streamed.Length > n.Shown)
                            {
                                Console.WriteLine("[frame {0,4}] {1}... {2}", f, Names[n.Id], Compact(n.Streamed.ToString()));
                                n.Shown = n.Streamed.Length;
                            }
                            continue;
                        }
                        Finish(n, f, quiet);
                    }
                    inLibrary.Add(lib.Elapsed.TotalMilliseconds);
                    if (wantReplies > 0 && npcs.All(n => n.Replies >= wantReplies)) break;
                    // the rest of the frame is the game's: sleep to the next one
                    double left = frameStart + FrameMs - clock.Elapsed.TotalMilliseconds;
                    if (left > 1) Thread.Sleep((int)left);
                }
            }
            finally
            {
                if (worker != null) worker.Dispose(); // cancels what is still running
                foreach (var n in npcs)
                    if (n.Reply != null) n.Reply.Dispose();
            }
            double seconds = run.Elapsed.TotalSeconds;
            var sorted = inLibrary.OrderBy(x => x).ToArray();
            Console.WriteLine();
            Console.WriteLine("library time per frame over {0} frames ({1}): p50 {2:F3} ms, p99 {3:F3} ms, max {4:F3} ms; run {5:F1} s",
                              sorted.Length, useWorker ? "polling a worker" : "Context.Step", sorted[sorted.Length / 2],
                              sorted[(int)(sorted.Length * 0.99)], sorted[sorted.Length - 1], seconds);
            foreach (var n in npcs)
                Console.WriteLine("  {0,-5} {1,3} replies ({2} failed, {3} not matching the schema), {4,4} tokens: {5:F1} tokens/s",
                                  Names[n.Id], n.Replies, n.Failed, n.Invalid, n.Tokens, n.Tokens / seconds);
            if (check && npcs.Any(n => n.Invalid > 0 || n.Replies - n.Failed < 1))
            {
                Console.WriteLine("npc: FAILED: a reply did not match the schema, or a character never replied");
                return 1;
            }
            return 0;
        }
    }

    static ChatMessage SystemMessage(int i)
    {
        return new ChatMessage("system", "You are " + Names[i] + ", " + Personas[i] + ", in the village of Oakvale. A traveller " +
                                         "talks to you. Answer in character, in one short sentence, as JSON: what you say in " +
                                         "\"say\", your mood in \"mood\".");
    }

    static void StartReply(Character n, Context ctx, int nCtx, Worker worker, ChatTemplate chat)
    {
        var p = new RequestOptions { Seq = n.Id, NPredict = 96, JsonSchema = Schema };
        // a conversation that nears the end of its sequence starts afresh
        if (n.Positions > nCtx - 200)
        {
            n.Messages.RemoveRange(1, n.Messages.Count - 1);
            n.Fed = 0;
            n.ReplyOpen = false;
            n.Positions = 0;
            p.NPast = 0;
        }
        n.Messages.Add(new ChatMessage("user", PlayerLines[n.NextLine++ % PlayerLines.Length]));
        // what this turn adds to the sequence: the end of the last reply,
        // the new message, the assistant prompt
        p.Prompt = (n.ReplyOpen ? chat.EndOfTurn : "") + chat.Format(n.Messages, n.Fed, true);
        p.Sampling.Temperature = 0.7f;
        p.Sampling.Seed = (ulong)(1000 + 100 * n.Id + n.Replies);
        n.Reply = worker != null ? worker.Start(ctx, p) : ctx.Start(p);
        n.Fed = n.Messages.Count;
    }

    static string Compact(string s)
    {
        return string.Join(" ", s.Split(new[] { ' ', '\n', '\t', '\r' }, StringSplitOptions.RemoveEmptyEntries));
    }

    static void Finish(Character n, int frame, bool quiet)
    {
        Request r = n.Reply;
        n.Reply = null;
        n.Streamed.Clear();
        n.Shown = 0;
        string text = r.Text;
        int tokens = r.Tokens.Length;
        n.Tokens += tokens;
        n.Positions += r.PromptTokens.Length + tokens;
        n.Replies++;
        if (r.Status != Status.Ok)
        {
            n.Failed++;
            Console.WriteLine("[frame {0,4}] {1}: (no reply: {2})", frame, Names[n.Id], r.Error);
            n.Positions = int.MaxValue / 2; // start afresh next time
        }
        else
        {
            string err;
            var reply = MiniJson.TryParse(text, out err) as Dictionary<string, object>;
            object say, mood;
            if (reply != null && reply.TryGetValue("say", out say) && say is string && reply.TryGetValue("mood", out mood) &&
                Moods.Contains(mood as string))
            {
                if (!quiet) Console.WriteLine("[frame {0,4}] {1} ({2}): {3}", frame, Names[n.Id], mood, say);
            }
            else
            {
                n.Invalid++;
                Console.WriteLine("[frame {0,4}] {1}: (not the schema's: {2}) {3}", frame, Names[n.Id], err, text);
            }
        }
        r.Dispose();
        n.Messages.Add(new ChatMessage("assistant", text));
        n.Fed = n.Messages.Count;
        n.ReplyOpen = true;
        n.WaitFrames = 20 + 10 * n.Id; // a pause, then the player speaks again
    }
}
