// Replays llama-server's ngram-copy rule (common/ngram-copy.cpp, dspine's patch) over given
// texts, as benchmarks/copy_length_replay.py replays the in-process rule: a test compares the
// two, draft by draft. No passes are timed here: the costs are the rule's own prior shape.
//
// stdin: pairs of lines, a prompt's tokens then its reply's (space-separated); stdout: per
// pair, one line of the drafts made, each its tokens joined by commas ("-" for none). The
// tokens that are numbers: those divisible by 5.
#include "ngram-copy.h"

#include <iostream>
#include <sstream>
#include <string>

static common_ngram_copy_tokens read_tokens(const std::string & line) {
    common_ngram_copy_tokens tokens;
    std::istringstream in(line);
    llama_token token;
    while (in >> token) {
        tokens.push_back(token);
    }
    return tokens;
}

int main(int argc, char ** argv) {
    // "timed": each pass is observed as taking a made-up time (the test gives the Python side the same)
    const bool timed = argc > 1 && std::string(argv[1]) == "timed";
    std::string prompt_line, reply_line;
    while (std::getline(std::cin, prompt_line) && std::getline(std::cin, reply_line)) {
        const common_ngram_copy_tokens prompt = read_tokens(prompt_line);
        const common_ngram_copy_tokens reply  = read_tokens(reply_line);
        // a made-up vocabulary's numbers (the test tells the Python side the same)
        common_ngram_copy copy({}, [](llama_token token) { return token % 5 == 0; });
        common_ngram_copy_costs costs;
        size_t step = 0;
        copy.reset(prompt);
        const size_t n = reply.size();
        size_t pos = 0;
        std::string out;
        while (n > 0 && pos < n - 1) {
            copy.add(reply[pos]);
            const common_ngram_copy_tokens draft = copy.draft((int32_t) std::min<size_t>(16, n - 1 - pos), costs);
            std::string cell;
            for (size_t i = 0; i < draft.size(); ++i) {
                cell += (i ? "," : "") + std::to_string(draft[i]);
            }
            out += (out.empty() ? "" : " ") + (cell.empty() ? std::string("-") : cell);
            size_t kept = 0;
            while (kept < draft.size() && pos + 1 + kept < n && draft[kept] == reply[pos + 1 + kept]) {
                kept++;
            }
            for (size_t i = 0; i < kept; ++i) {
                copy.add(reply[pos + 1 + i]);
            }
            if (timed) {
                const int32_t pass = (int32_t) draft.size() + 1;
                costs.observe(pass, 0.008 + 0.0025 * (pass - 1) + 0.0001 * (double) (step % 7));
            }
            step++;
            pos += kept + 1;
        }
        std::cout << out << "\n";
    }
    return 0;
}
