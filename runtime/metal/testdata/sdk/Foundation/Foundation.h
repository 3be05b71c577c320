// Minimal stand-in for the macOS SDK's Foundation.h: only what runtime/metal's
// bridge uses, declared from Apple's documentation, so that
// TestDarwinBridgeTypeChecks can compile the cgo bridge's Objective-C on Linux.
// It is not Apple's header.
#pragma once
#include <stddef.h>
#include <stdint.h>
typedef unsigned long NSUInteger;
typedef long NSInteger;
typedef signed char BOOL;
#define YES ((BOOL)1)
#define NO ((BOOL)0)
#define nil ((id)0)
typedef const void *CFTypeRef;
id CFBridgingRelease(CFTypeRef);
@protocol NSObject
@end
__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)new;
+ (instancetype)alloc;
- (instancetype)init;
@end
typedef struct { unsigned long state; __unsafe_unretained id *itemsPtr; unsigned long *mutationsPtr; unsigned long extra[5]; } NSFastEnumerationState;
@protocol NSFastEnumeration
- (NSUInteger)countByEnumeratingWithState:(NSFastEnumerationState *)state objects:(__unsafe_unretained id [])buffer count:(NSUInteger)len;
@end
@interface NSString : NSObject
+ (instancetype)stringWithUTF8String:(const char *)s;
@property (readonly) const char *UTF8String;
@end
@interface NSError : NSObject
@property (readonly, copy) NSString *localizedDescription;
@end
@interface NSMutableArray<ObjectType> : NSObject <NSFastEnumeration>
+ (instancetype)array;
- (void)addObject:(ObjectType)o;
- (void)removeAllObjects;
@end
