// cxx_exceptions: C++ exceptions and the standard library in a static binary:
// throw/catch across functions, std::string/vector/map, a custom exception
// class, rethrow, destructors running during unwinding, std::sort,
// catch-by-base, catch(...), nested try, noexcept-free function pointers.
// Exit status 0.
#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

struct Tracer {
    std::string name;
    explicit Tracer(std::string n) : name(std::move(n)) { std::printf("ctor %s\n", name.c_str()); }
    ~Tracer() { std::printf("dtor %s\n", name.c_str()); }
};

class MyError : public std::runtime_error {
public:
    int code;
    MyError(const std::string &what, int c) : std::runtime_error(what), code(c) {}
};

__attribute__((noinline)) static int level3(int x)
{
    Tracer t("level3");
    if (x > 2)
        throw MyError("x too big: " + std::to_string(x), x * 11);
    return x;
}

__attribute__((noinline)) static int level2(int x)
{
    Tracer t("level2");
    std::vector<int> v(x + 1, x);
    return level3(x) + (int)v.size();
}

__attribute__((noinline)) static int level1(int x)
{
    try {
        return level2(x);
    } catch (const MyError &e) {
        std::printf("level1 saw MyError(%s), rethrowing\n", e.what());
        throw;
    }
}

__attribute__((noinline)) static void throws_int(int v) { throw v; }

__attribute__((noinline)) static void throws_std(const std::string &s)
{
    std::vector<int> v;
    (void)v.at(s.size()); // std::out_of_range
}

int main()
{
    // 1. normal path and thrown path through three frames, with rethrow.
    for (int x = 1; x <= 3; x++) {
        try {
            int r = level1(x);
            std::printf("level1(%d) = %d\n", x, r);
        } catch (const MyError &e) {
            std::printf("main caught MyError code=%d what=%s\n", e.code, e.what());
        }
    }

    // 2. catch by base class, catch of a non-class type, catch(...).
    try {
        throws_std("hello");
    } catch (const std::exception &e) {
        std::printf("caught std::exception (out_of_range): %s\n",
                    dynamic_cast<const std::out_of_range *>(&e) ? "yes" : "no");
    }
    try {
        throws_int(42);
    } catch (int v) {
        std::printf("caught int %d\n", v);
    }
    try {
        throw std::string("a string");
    } catch (...) {
        std::printf("caught (...)\n");
    }

    // 3. nested try: inner handler throws a different exception.
    try {
        try {
            Tracer t("nested");
            throw std::logic_error("inner");
        } catch (const std::logic_error &e) {
            std::printf("inner caught %s\n", e.what());
            throw MyError("from handler", 5);
        }
    } catch (const MyError &e) {
        std::printf("outer caught %s code=%d\n", e.what(), e.code);
    }

    // 4. containers and algorithms.
    std::map<std::string, int> wc;
    const char *words[] = {"pear", "apple", "fig", "apple", "kiwi", "pear", "apple"};
    for (const char *w : words)
        wc[w]++;
    for (const auto &kv : wc)
        std::printf("word %s: %d\n", kv.first.c_str(), kv.second);

    std::vector<unsigned> v;
    unsigned s = 12345;
    for (int i = 0; i < 500; i++) {
        s = s * 1103515245u + 12345u;
        v.push_back((s >> 8) % 10000);
    }
    std::sort(v.begin(), v.end());
    unsigned long sum = 0;
    for (unsigned x : v)
        sum += x;
    std::printf("sorted: %s first=%u last=%u sum=%lu\n",
                std::is_sorted(v.begin(), v.end()) ? "yes" : "no", v.front(), v.back(), sum);

    std::string str = "ferrite";
    str += "-";
    str += std::to_string(2024);
    std::reverse(str.begin(), str.end());
    std::printf("string: %s (len %zu)\n", str.c_str(), str.size());

    std::printf("cxx_exceptions done\n");
    return 0;
}
